//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"net"
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

// Close has nothing to release off Linux.
func (s *Sandbox) Close() error { return nil }

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

// Loopback is unavailable off Linux.
type Loopback struct{}

// NewLoopback returns ErrUnavailable off Linux.
func NewLoopback() (*Loopback, error) { return nil, ErrUnavailable }

// Listener is nil off Linux.
func (l *Loopback) Listener() net.Listener { return nil }

// Addr is empty off Linux.
func (l *Loopback) Addr() string { return "" }

// Close does nothing off Linux.
func (l *Loopback) Close() error { return nil }

// Config is empty off Linux.
func (s *Sandbox) Config() Config { return Config{} }
