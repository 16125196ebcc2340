package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap/zapcore"
)

// slogLogger adapts the server's tag logger to slog, dropping records below level.
type slogLogger struct {
	log   *slog.Logger
	level slog.Level
}

func (s slogLogger) Debug(msg string, tags ...tag.Tag)  { s.emit(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)   { s.emit(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)   { s.emit(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// Panic and Fatal stop the caller, as the server's own logger does (zap panics, or exits): the server
// calls Fatal where it cannot go on (a listener that failed to bind) and would otherwise carry on with a
// nil listener and crash somewhere else. The panic carries a *FatalError, which the builder recovers
// into an ordinary error (guard).
func (s slogLogger) Panic(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(newFatalError(msg, tags))
}

func (s slogLogger) Fatal(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(newFatalError(msg, tags))
}

// FatalError is a fatal log record of the embedded server: its message and the error it tagged, if any.
type FatalError struct {
	Msg string
	Err error
	// Detail lists the record's other tags ("key=value"), e.g. the address that failed.
	Detail []string
}

func newFatalError(msg string, tags []tag.Tag) *FatalError {
	e := &FatalError{Msg: msg}
	for _, t := range tags {
		// tag.Error keeps the error itself in its zap field (Value() would flatten it to text), so the
		// chain survives: errors.Is(err, syscall.EADDRINUSE) holds for a failed bind.
		if zt, ok := t.(tag.ZapTag); ok && e.Err == nil {
			if err, ok := zt.Field().Interface.(error); ok && zt.Field().Type == zapcore.ErrorType {
				e.Err = err
				continue
			}
		}
		e.Detail = append(e.Detail, fmt.Sprintf("%s=%v", t.Key(), t.Value()))
	}
	return e
}

func (e *FatalError) Error() string {
	s := "temporal server: " + e.Msg
	if len(e.Detail) > 0 {
		s += " (" + strings.Join(e.Detail, ", ") + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FatalError) Unwrap() error { return e.Err }

// guard runs f, turning a fatal log record's panic (see slogLogger.Fatal) into an error; any other
// panic is not ours to swallow and goes on.
func guard[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*FatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	return f()
}

func (s slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if s.log == nil || level < s.level || !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		attrs[i] = slog.Any(t.Key(), t.Value())
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}
