package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the duration value that disables expiry or consolidation.
const Never = "Never"

// NillableDuration is a Go duration or "Never" (Duration nil). It marshals
// as Go's canonical duration string ("1m" becomes "1m0s"), as Karpenter does.
type NillableDuration struct {
	Duration *time.Duration
}

// MustParseNillableDuration parses "Never" or a Go duration; it panics on a
// bad literal and is meant for constants in code, not for user input.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a Go duration such as "720h".
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("want a duration such as 30s or 720h, or %q: %w", Never, err)
	}
	return NillableDuration{Duration: &d}, nil
}

// NewNillableDuration returns a set duration.
func NewNillableDuration(d time.Duration) NillableDuration {
	return NillableDuration{Duration: &d}
}

// IsNever reports whether the duration is "Never".
func (d NillableDuration) IsNever() bool { return d.Duration == nil }

// String returns the canonical form.
func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// UnmarshalJSON accepts "Never" or a Go duration string.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\" or %q, got %s", Never, b)
	}
	v, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the canonical duration string or "Never".
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}
