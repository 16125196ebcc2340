//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"runtime"
)

// Sandbox is unavailable off Linux.
type Sandbox struct{}

// New returns ErrUnavailable off Linux.
func New(cfg Config) (*Sandbox, error) {
	return nil, fmt.Errorf("sandbox: new: %s: %w", runtime.GOOS, ErrUnavailable)
}

// Mode reports the isolation achieved.
func (s *Sandbox) Mode() Mode { return "" }

// Run is unavailable off Linux.
func (s *Sandbox) Run(ctx context.Context, c Command) (Result, error) {
	return Result{}, ErrUnavailable
}

// ModeReason is empty off Linux.
func (s *Sandbox) ModeReason() string { return "" }

// Check is unavailable off Linux.
func (s *Sandbox) Check(ctx context.Context, p Program, cases []TestCase, lim Limits) (Report, error) {
	return Report{}, ErrUnavailable
}

// Config is empty off Linux.
func (s *Sandbox) Config() Config { return Config{} }
