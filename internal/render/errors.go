package render

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// TemplateError is a chart that failed to render. It holds where, and what
// only when the chart itself said it: a template's message can carry a
// value, and values can be secrets. Helm's own messages (a bad call, a YAML
// error) are dropped. The message a chart gives required or fail is written
// for the person who sets the values ("ingress.host is required"), so it
// is kept when the caller can hide the values it must not show
// (Options.Mask), and dropped otherwise.
type TemplateError struct {
	// Stage is "parse" for a template that does not parse, "execute" for one
	// that fails while it runs (required and fail included), and "yaml" for
	// output that is not valid YAML or not a Kubernetes object.
	Stage string
	// Template is the template file, such as mychart/templates/secret.yaml.
	// It is empty when Helm named no file.
	Template string
	// Line and Column locate the failure in Template; 0 when unknown. For the
	// "yaml" stage, Line counts within Document.
	Line, Column int
	// Document is the 1-based YAML document of Template, for the "yaml" stage.
	Document int
	// Message is the chart's own message, from its required or fail call,
	// already passed through Options.Mask; empty when there was no such
	// message or no Mask.
	Message string
	// Problem is what Capstan found wrong in a "yaml" stage document, in
	// its own words, naming the object and a key but no value: a label
	// that is not a string, or a document with no kind. Empty when there
	// is nothing to say but the place.
	Problem string
}

// Error says where the chart failed, and the chart's own message when it
// has one; otherwise what to check, without Helm's message.
func (e *TemplateError) Error() string {
	where := "the chart"
	if e.Template != "" {
		where = e.Template
		if e.Document > 0 {
			where += fmt.Sprintf(" (document %d)", e.Document)
		}
		if e.Line > 0 {
			where += fmt.Sprintf(" line %d", e.Line)
			if e.Column > 0 {
				where += fmt.Sprintf(" column %d", e.Column)
			}
		}
	}
	if e.Message != "" {
		return fmt.Sprintf("render: the chart stopped in %s: %s", where, e.Message)
	}
	what := "template failed"
	switch e.Stage {
	case "parse":
		what = "template does not parse"
	case "yaml":
		what = "template's output is not a valid Kubernetes object"
	}
	if e.Problem != "" {
		return fmt.Sprintf("render: %s in %s: %s", what, where, e.Problem)
	}
	return fmt.Sprintf("render: %s in %s; its message is withheld because it can carry a value: "+
		"check that template and the values it reads (a required value may be missing)", what, where)
}

// chartMessagePattern is how Helm words the error of a chart's own required
// or fail call, and no other: "execution error at (file:line:column): the
// chart's message".
var chartMessagePattern = regexp.MustCompile(`^execution error at \([^()]+\): (?s:(.+))$`)

// locationPattern finds "file:line" and "file:line:column" in Helm's errors.
var locationPattern = regexp.MustCompile(`([^\s():"<>]+):(\d+)(?::(\d+))?`)

// yamlLinePattern finds the line of a YAML parser's error.
var yamlLinePattern = regexp.MustCompile(`\byaml: line (\d+):`)

// redactTemplateError turns an error of Helm's engine into a TemplateError
// built only from the names of the chart's templates and numbers, and the
// chart's own message from required or fail, unmasked: helm masks or drops
// it before the error leaves the package. Nothing else of Helm's message is
// copied. templates is the set of the chart's template names, as the
// engine names them.
func redactTemplateError(err error, templates map[string]bool) *TemplateError {
	msg := err.Error()
	te := &TemplateError{Stage: "execute"}
	if strings.HasPrefix(msg, "parse error") {
		te.Stage = "parse"
	}
	if m := chartMessagePattern.FindStringSubmatch(msg); m != nil {
		te.Message = m[1]
	}
	for _, m := range locationPattern.FindAllStringSubmatch(msg, -1) {
		if !templates[m[1]] {
			continue
		}
		te.Template = m[1]
		te.Line, _ = strconv.Atoi(m[2])
		if m[3] != "" {
			te.Column, _ = strconv.Atoi(m[3])
		}
		return te
	}
	// Helm names a file without a line for some errors: "(file)". The
	// earliest one is Helm's own location.
	first := -1
	for name := range templates {
		if i := strings.Index(msg, "("+name+")"); i >= 0 && (first < 0 || i < first) {
			first, te.Template = i, name
		}
	}
	return te
}

// yamlError is a rendered document that is not valid YAML or not an object:
// it keeps the template, the document and the parser's line, and for a
// document that is not an object, what it lacks (a notObjectError, which
// quotes no value); nothing else.
func yamlError(template string, document int, err error) *TemplateError {
	te := &TemplateError{Stage: "yaml", Template: template, Document: document}
	if m := yamlLinePattern.FindStringSubmatch(err.Error()); m != nil {
		te.Line, _ = strconv.Atoi(m[1])
	}
	if no, ok := errors.AsType[*notObjectError](err); ok {
		te.Problem = no.problem
	}
	return te
}

// maxChartMessage bounds the chart's message in an error: a status
// condition, an event and a terminal line each hold one.
const maxChartMessage = 512

// maskChartMessage passes a template error's chart message through mask,
// or drops it when there is no mask. Every other error is returned as it is.
func maskChartMessage(err error, mask func(string) string) error {
	var te *TemplateError
	if !errors.As(err, &te) || te.Message == "" {
		return err
	}
	out := *te
	out.Message = ""
	if mask != nil {
		m := strings.TrimSpace(mask(te.Message))
		if len(m) > maxChartMessage {
			m = strings.ToValidUTF8(m[:maxChartMessage], "") + "…"
		}
		out.Message = m
	}
	return &out
}
