package devserver

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log/tag"
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
func (s slogLogger) Panic(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) Fatal(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }

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
