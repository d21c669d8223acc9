package values

import (
	"math/big"
	"regexp"
	"slices"
	"strconv"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// typeRule is the rule of a schema error about a value's type.
const typeRule = "type"

// untypedHint ends the type error of a secret input the schema refuses as
// a string and that could not be typed.
const untypedHint = "; a secret input given as a Secret's targetPath is read as a boolean or a number only when its text is true, false or a decimal number (such as 42 or 2.5) that a 64-bit float keeps digit for digit, and is a string otherwise"

// decimalRE is the grammar of a number a secret input's text may be read
// as: JSON's, with an exponent of at most three digits.
var decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$`)

// maxDecimalLen bounds the text read as a number: a float64 keeps 17
// significant digits at most, so a longer text is a string.
const maxDecimalLen = 32

// typedText returns what a secret input's text stands for when a schema
// refuses it as a string: true, false, or a number in JSON's grammar that a
// float64 keeps digit for digit, as a values document gives one (Helm's
// values go through JSON, so a number is a float64). "0123",
// "12345678901234567890" or "yes" stand for no other type: a PIN with a
// leading zero or a long number must never lose digits.
func typedText(s string) (any, bool) {
	switch s {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	if len(s) > maxDecimalLen || !decimalRE.MatchString(s) {
		return nil, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	text, ok1 := new(big.Rat).SetString(s)
	kept, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok1 || !ok2 || text.Cmp(kept) != 0 {
		return nil, false
	}
	return f, true
}

// secretInputLayers returns, by the JSON path each sets, the targetPath
// entries of src that read a Secret and set a writeOnly value of the
// effective values: the secret inputs that Capstan's writers make. Where
// several entries set one path, the last, which wins, is the one given.
func secretInputLayers(src Sources, res *Result) map[string]int {
	if res.Schema == nil {
		return nil
	}
	writeOnly := map[string]bool{}
	res.Schema.findSecretInputs(res.Effective, nil, nil, func(p []string) { writeOnly[pointer(p)] = true })
	out := map[string]int{}
	for i, l := range src.From {
		if l.path == nil || !l.FromSecret() || l.Missing {
			continue
		}
		if p := pointer(l.path.strings()); writeOnly[p] {
			out[p] = i
		}
	}
	return out
}

// typeSecretInputs types the secret inputs whose schema refuses them for
// their type: a writeOnly property of type integer, number or boolean
// given as a Secret's targetPath, whose text is always a string, is set as
// the boolean or the number its text reads as (typedText), so a PIN, a
// port or a flag can be a secret input. One the schema refuses as typed
// too (an integer property given 0.5) goes back to its string; Compose
// runs it twice at most, so it is never typed again. It returns src
// unchanged and false when nothing changes. Every other targetPath entry
// stays a string.
func typeSecretInputs(src Sources, res *Result) (Sources, bool) {
	if !hasTypeError(res) {
		return src, false
	}
	typeErrs := map[string]bool{}
	for _, e := range res.Errors {
		if e.Rule == typeRule {
			typeErrs[e.Path] = true
		}
	}
	var from []Layer
	change := func(i int, typed any) {
		if from == nil {
			from = append([]Layer(nil), src.From...)
		}
		from[i].typed = typed
	}
	for p, i := range secretInputLayers(src, res) {
		l := src.From[i]
		if !typeErrs[p] {
			continue
		}
		if l.typed != nil {
			change(i, nil)
		} else if v, ok := typedText(l.Raw); ok {
			change(i, v)
		}
	}
	if from == nil {
		return src, false
	}
	src.From = from
	return src, true
}

// noteUntypedInputs adds to the type error of each secret input left a
// string when its text is read as a string only, so the message says how
// to give a number or a boolean.
func noteUntypedInputs(src Sources, res *Result) {
	if !hasTypeError(res) {
		return
	}
	layers := secretInputLayers(src, res)
	for i, e := range res.Errors {
		if j, ok := layers[e.Path]; ok && e.Rule == typeRule && src.From[j].typed == nil {
			res.Errors[i] = capstanv1.ValuesError{Path: e.Path, Rule: e.Rule, Message: e.Message + untypedHint}
		}
	}
}

// hasTypeError reports whether res holds a type error, the only errors
// that typing a secret input can answer; without one, the schema's
// writeOnly properties need not be looked for.
func hasTypeError(res *Result) bool {
	return slices.ContainsFunc(res.Errors, func(e capstanv1.ValuesError) bool { return e.Rule == typeRule })
}
