package redis

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger, which by default writes
// pool and reconnect errors to stderr: a few lines for every failed Open
// and about two a second while a server is down. A library must not write
// to its user's stderr, so the first Open of this backend routes go-redis's
// logger to slog, at debug level, through the logger of the most recent
// Open that was given one (padlock.WithLogger), and discards it otherwise.
// A program that wants go-redis's own logging back calls goredis.SetLogger
// after opening.
var (
	installLogger sync.Once
	logTo         atomic.Pointer[slog.Logger]
)

type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := logTo.Load(); l != nil {
		l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}

// routeLogs installs the forwarding logger and, unless l discards
// everything, makes it the destination.
func routeLogs(l *slog.Logger) {
	installLogger.Do(func() { goredis.SetLogger(slogLogger{}) })
	if l != nil && l.Handler() != slog.DiscardHandler {
		logTo.Store(l)
	}
}
