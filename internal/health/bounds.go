package health

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// maxResultBytes bounds the string that one call of a string function
// may make. CEL charges a call after it returns, from the size of its
// result: without a bound, one replace() of a string by a string the
// object holds, or three nested ones of literals, allocates gigabytes
// before the cost limit is even consulted, and the controller of every
// tenant dies of it. A result of more bytes has more than costLimit
// characters, which every guarded function is charged at least, so the
// bound refuses no evaluation that the cost limit would have let end.
const maxResultBytes = 4 * costLimit

// maxResultItems bounds the list that one split() may make, for the same
// reason: it is charged at least one per item.
const maxResultItems = costLimit

// errTooLarge is what a guarded call gives instead of a result past its
// bound. Its words name the cost limit, which evalError turns into the
// message of an evaluation that costs too much.
var errTooLarge = errors.New("result would exceed the cost limit")

// guards are the string extensions' functions whose result may be
// larger than their arguments, each with a check, made before the call,
// of the largest result it can give. The others (lowerAscii, trim,
// substring, reverse, charAt, indexOf…) give no more than their target,
// which the object or an earlier, bounded call already holds.
var guards = []struct {
	function, overload string
	check              func(args []ref.Val) error
}{
	{"replace", "string_replace_string_string", checkReplace},
	{"replace", "string_replace_string_string_int", checkReplace},
	{"split", "string_split_string", checkSplit},
	{"split", "string_split_string_int", checkSplit},
	{"join", "list_join", checkJoin},
	{"join", "list_join_string", checkJoin},
	{"format", "string_format", checkFormat},
	{"strings.quote", "strings_quote", checkQuote},
}

// guardedStrings is env with each guarded overload's implementation
// replaced by one that checks its result's size first. It fails when an
// overload is missing, so that a cel-go upgrade that renames one is
// found by the tests, not by an unguarded controller.
func guardedStrings(env *cel.Env) (*cel.Env, error) {
	opts := make([]cel.EnvOption, 0, len(guards))
	for _, g := range guards {
		fn, ok := env.Functions()[g.function]
		if !ok {
			return nil, fmt.Errorf("cel: no function %s to guard", g.function)
		}
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, err
		}
		var call func(args ...ref.Val) ref.Val
		for _, b := range bindings {
			if b.Operator == g.overload {
				call = implementation(b.Unary, b.Binary, b.Function)
			}
		}
		var opt cel.FunctionOpt
		for _, o := range fn.OverloadDecls() {
			if o.ID() != g.overload || call == nil {
				continue
			}
			check := g.check
			binding := cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				if err := check(args); err != nil {
					return types.WrapErr(fmt.Errorf("%s: %w", g.function, err))
				}
				return call(args...)
			})
			if o.IsMemberFunction() {
				opt = cel.MemberOverload(g.overload, o.ArgTypes(), o.ResultType(), binding)
			} else {
				opt = cel.Overload(g.overload, o.ArgTypes(), o.ResultType(), binding)
			}
		}
		if opt == nil {
			return nil, fmt.Errorf("cel: no overload %s of %s to guard", g.overload, g.function)
		}
		opts = append(opts, cel.Function(g.function, opt))
	}
	return env.Extend(opts...)
}

// implementation calls an overload by whichever of its bindings takes
// the number of arguments given.
func implementation(unary func(ref.Val) ref.Val, binary func(ref.Val, ref.Val) ref.Val, function func(...ref.Val) ref.Val) func(args ...ref.Val) ref.Val {
	return func(args ...ref.Val) ref.Val {
		switch {
		case len(args) == 1 && unary != nil:
			return unary(args[0])
		case len(args) == 2 && binary != nil:
			return binary(args[0], args[1])
		case function != nil:
			return function(args...)
		}
		return types.NewErr("no such overload")
	}
}

// resultCosts charges format() and strings.quote() for the size of their
// result, as CEL charges replace() and join(): by default each is charged
// a tenth of its format string or target alone, so a comprehension could
// keep thousands of large results for a few units each.
var resultCosts = cel.CostTrackerOptions(
	interpreter.OverloadCostTracker("string_format", chargeResult),
	interpreter.OverloadCostTracker("strings_quote", chargeResult),
)

func chargeResult(args []ref.Val, result ref.Val) *uint64 {
	cost := 1 + uint64(math.Ceil(float64(sizeOf(args[0]))*common.StringTraversalCostFactor)) + sizeOf(result)
	return &cost
}

func sizeOf(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 1
}

// NOTE: each check leaves arguments of a type the overload does not take
// to the overload, which refuses them.

func checkReplace(args []ref.Val) error {
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	count := strings.Count(string(s), string(old))
	if len(args) == 4 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && int64(n) < int64(count) {
			count = int(n)
		}
	}
	grow := len(repl) - len(old)
	if grow <= 0 || count == 0 {
		return within(len(s))
	}
	if count > maxResultBytes/grow {
		return errTooLarge
	}
	return within(len(s) + count*grow)
}

func checkSplit(args []ref.Val) error {
	s, ok1 := args[0].(types.String)
	sep, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return nil
	}
	items := strings.Count(string(s), string(sep)) + 1
	if len(args) == 3 {
		if n, ok := args[2].(types.Int); ok && n >= 0 && int64(n) < int64(items) {
			items = int(n)
		}
	}
	if items > maxResultItems {
		return errTooLarge
	}
	return nil
}

func checkJoin(args []ref.Val) error {
	list, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	sep := 0
	if len(args) == 2 {
		if s, ok := args[1].(types.String); ok {
			sep = len(s)
		}
	}
	size, n := 0, 0
	for it := list.Iterator(); it.HasNext() == types.True; n++ {
		if s, ok := it.Next().(types.String); ok {
			size += len(s)
		}
		if n > 0 {
			size += sep
		}
		if size > maxResultBytes {
			return errTooLarge
		}
	}
	return nil
}

// checkQuote counts the quoted string as quote() writes it: an invalid
// byte becomes U+FFFD, a control character or a quote an escape of two.
func checkQuote(args []ref.Val) error {
	s, ok := args[0].(types.String)
	if !ok {
		return nil
	}
	size := 2
	for _, r := range string(s) {
		switch r {
		case '\a', '\b', '\f', '\n', '\r', '\t', '\v', '\\', '"':
			size += 2
		default:
			size += utf8.RuneLen(r)
		}
		if size > maxResultBytes {
			return errTooLarge
		}
	}
	return nil
}

// checkFormat bounds the formatted string by the format string and, for
// each argument, twice its strings' and bytes' length (a %x clause writes
// two digits a byte), lists and maps with their punctuation, and 512 bytes
// for any other value: a double written with the largest precision allowed
// (100) takes some 410.
func checkFormat(args []ref.Val) error {
	format, ok1 := args[0].(types.String)
	list, ok2 := args[1].(traits.Lister)
	if !ok1 || !ok2 {
		return nil
	}
	if len(format)+textBound(list) > maxResultBytes {
		return errTooLarge
	}
	return nil
}

// textBound is the most bytes format() may write for v, or a number past
// maxResultBytes once it is known to be past it.
func textBound(v ref.Val) int {
	switch v := v.(type) {
	case types.String:
		return 2 * len(v)
	case types.Bytes:
		return 2 * len(v)
	case traits.Mapper:
		size := 2
		for it := v.Iterator(); it.HasNext() == types.True && size <= maxResultBytes; {
			key := it.Next()
			size += 4 + textBound(key)
			if val, ok := v.Find(key); ok {
				size += textBound(val)
			}
		}
		return size
	case traits.Lister:
		size := 2
		for it := v.Iterator(); it.HasNext() == types.True && size <= maxResultBytes; {
			size += 2 + textBound(it.Next())
		}
		return size
	case *types.Type:
		return len(v.TypeName())
	}
	return 512
}

func within(size int) error {
	if size > maxResultBytes {
		return errTooLarge
	}
	return nil
}
