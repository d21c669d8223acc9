package values

import (
	"errors"
	"fmt"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// SchemaErrorPath is the Path of a ValuesError that says a chart's
// values.schema.json itself is broken, rather than a value; its Rule is
// "schema".
const SchemaErrorPath = "values.schema.json"

// InvalidError is a problem with an add-on's values that a person must fix,
// such as a valuesFrom entry that names a missing Secret or a targetPath that
// does not parse. The controller reports its Errors in the plan and stops
// until the Addon or its values objects change. It never holds a value.
type InvalidError struct {
	Errors []capstanv1.ValuesError
}

// Error joins the messages of every problem.
func (e *InvalidError) Error() string {
	msgs := make([]string, 0, len(e.Errors))
	for _, ve := range e.Errors {
		msgs = append(msgs, ve.Message)
	}
	return "invalid values: " + strings.Join(msgs, "; ")
}

// IsInvalid reports whether err is, or wraps, an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// invalid builds an *InvalidError with one problem.
func invalid(path, rule, format string, args ...any) *InvalidError {
	return &InvalidError{Errors: []capstanv1.ValuesError{{Path: path, Rule: rule, Message: fmt.Sprintf(format, args...)}}}
}

// errorList collects problems and returns them as one *InvalidError.
type errorList []capstanv1.ValuesError

func (l *errorList) add(path, rule, format string, args ...any) {
	*l = append(*l, capstanv1.ValuesError{Path: path, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (l errorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return &InvalidError{Errors: l}
}
