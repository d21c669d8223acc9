package render

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// TemplateError is a chart that failed to render. It holds where, never what:
// a template's message (from required, fail, or a YAML error) can carry a
// value, and values can be secrets, so the message is dropped.
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
}

// Error says where the chart failed and what to do, without the message.
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
	what := "template failed"
	switch e.Stage {
	case "parse":
		what = "template does not parse"
	case "yaml":
		what = "template's output is not a valid Kubernetes object"
	}
	return fmt.Sprintf("render: %s in %s; its message is withheld because it can carry a value: "+
		"check that template and the values it reads (a required value may be missing)", what, where)
}

// locationPattern finds "file:line" and "file:line:column" in Helm's errors.
var locationPattern = regexp.MustCompile(`([^\s():"<>]+):(\d+)(?::(\d+))?`)

// yamlLinePattern finds the line of a YAML parser's error.
var yamlLinePattern = regexp.MustCompile(`\byaml: line (\d+):`)

// redactTemplateError turns an error of Helm's engine into a TemplateError
// built only from the names of the chart's templates and numbers: nothing of
// the message is copied, so no value can leak through it. templates is the
// set of the chart's template names, as the engine names them.
func redactTemplateError(err error, templates map[string]bool) *TemplateError {
	msg := err.Error()
	te := &TemplateError{Stage: "execute"}
	if strings.HasPrefix(msg, "parse error") {
		te.Stage = "parse"
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
// it keeps the template, the document and the parser's line, nothing else.
func yamlError(template string, document int, err error) *TemplateError {
	te := &TemplateError{Stage: "yaml", Template: template, Document: document}
	if m := yamlLinePattern.FindStringSubmatch(err.Error()); m != nil {
		te.Line, _ = strconv.Atoi(m[1])
	}
	return te
}
