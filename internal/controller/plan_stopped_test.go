package controller

import (
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/source"
)

// TestPlanStopped: a plan on demand that the signature check stopped
// returns that check's own error, wrapped, so a caller tells a missing
// signature from a wrong one by the error and not by a reason's spelling;
// a stop with no signature behind it is an internal error, not a
// signature's. An add-on whose profile changed under it says so, with what
// to do, and is no signature's error either.
func TestPlanStopped(t *testing.T) {
	missing := &source.SignatureError{Missing: true, Err: errors.New("the chart has no provenance file")}
	invalid := &source.SignatureError{Err: errors.New("the provenance file is not signed by a key of the keyring")}
	for _, tc := range []struct {
		name    string
		hold    *hold
		moved   *hold
		want    error
		missing bool
		held    bool
		says    string
	}{
		{name: "a missing signature", hold: &hold{reason: "SignatureMissing", blocked: true, message: "m", err: missing}, want: missing, missing: true, says: "(SignatureMissing)"},
		{name: "a wrong signature", hold: &hold{reason: "SignatureInvalid", blocked: true, message: "m", err: invalid}, want: invalid, says: "(SignatureInvalid)"},
		{name: "no signature behind the stop", says: "internal error: the Fetch step"},
		{name: "a profile that changed under the add-on", moved: &hold{reason: ReasonProfileChanged, blocked: true, message: "Installed under the cluster profile, but …"},
			says: "Blocked (ProfileChanged) and its sync is held since its profile changed, so there is no plan: Installed under the cluster profile", held: true},
	} {
		s := &scope{}
		s.found.signature, s.found.profileChanged = tc.hold, tc.moved
		err := planStopped(s, "Fetch")
		var sig *source.SignatureError
		if got := errors.As(err, &sig); got != (tc.want != nil) {
			t.Errorf("%s: the error %q is a SignatureError: %v, want %v", tc.name, err, got, tc.want != nil)
		}
		if tc.want != nil && (!errors.Is(err, tc.want) || sig.Missing != tc.missing) {
			t.Errorf("%s: the error %q does not wrap the signature check's own error", tc.name, err)
		}
		if errors.Is(err, ErrProfileHeld) != tc.held {
			t.Errorf("%s: the error %q is ErrProfileHeld: %v, want %v", tc.name, err, !tc.held, tc.held)
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: the error %q does not say %q", tc.name, err, tc.says)
		}
	}
}
