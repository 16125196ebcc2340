package usage

import (
	"errors"
	"fmt"
)

// Error is a bad option, argument or input; Err says which and why.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is a usage error with a formatted message (%w wraps as fmt.Errorf does).
func Errorf(format string, a ...any) error { return &Error{fmt.Errorf(format, a...)} }

// Wrap marks err as a usage error; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{err}
}

// Is reports whether err, or an error it wraps, is a usage error.
func Is(err error) bool {
	var ue *Error
	return errors.As(err, &ue)
}
