package redis

import (
	_ "embed"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT
// (goredis.Script.Run does both). Every mutating script checks the hold's
// unique id first, so a stale call never touches a newer hold. The
// scripts that see readers and permits get lib.lua's helpers at their
// line "-- lib.lua" (withLib); the mutex's acquire and renew scripts do
// without, and release.lua's plain Unlock returns before that line, so
// that the mutex's free path is what it was before readers and permits.
var (
	//go:embed scripts/lib.lua
	libSrc string
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/acquire_all.lua
	acquireAllSrc string
	//go:embed scripts/fair_acquire.lua
	fairAcquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/renew_hold.lua
	renewHoldSrc string
	//go:embed scripts/renew_many.lua
	renewManySrc string
	//go:embed scripts/renew_any_slot.lua
	renewAnySlotSrc string
	//go:embed scripts/cancel.lua
	cancelSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/acquire_shared.lua
	acquireSharedSrc string
	//go:embed scripts/share.lua
	shareSrc string
	//go:embed scripts/elect.lua
	electSrc string
	//go:embed scripts/proclaim.lua
	proclaimSrc string
	//go:embed scripts/leader.lua
	leaderSrc string

	acquireScript       = goredis.NewScript(acquireSrc)
	acquireAllScript    = goredis.NewScript(acquireAllSrc)
	fairAcquireScript   = goredis.NewScript(fairAcquireSrc)
	releaseScript       = goredis.NewScript(withLib(releaseSrc))
	renewScript         = goredis.NewScript(renewSrc)
	cancelScript        = goredis.NewScript(withLib(cancelSrc))
	inspectScript       = goredis.NewScript(inspectSrc)
	acquireSharedScript = goredis.NewScript(withLib(acquireSharedSrc))
	shareScript         = goredis.NewScript(withLib(shareSrc))

	// A candidacy's runs of the mutex's scripts (elect.lua), and the
	// election's own.
	electAcquireScript     = goredis.NewScript(electing(acquireSrc))
	electFairAcquireScript = goredis.NewScript(electing(fairAcquireSrc))
	electRenewScript       = goredis.NewScript(electing(renewSrc))
	electReleaseScript     = goredis.NewScript(electing(withLib(releaseSrc)))
	electCancelScript      = goredis.NewScript(electing(withLib(cancelSrc)))
	proclaimScript         = goredis.NewScript(proclaimSrc)
	leaderScript           = goredis.NewScript(leaderSrc)
)

// electing puts src into elect.lua at its line "-- body": src runs as a
// function whose answer elect.lua reads.
func electing(src string) string {
	const mark = "\n-- body\n"
	if !strings.Contains(electSrc, mark) {
		panic("padlock/redis: elect.lua has no line \"-- body\"")
	}
	return strings.Replace(electSrc, mark, "\n"+src+"\n", 1)
}

// withLib puts lib.lua's helpers into src at its line "-- lib.lua".
func withLib(src string) string { return insertAt(src, "-- lib.lua", libSrc) }

// insertAt returns src with its line mark replaced by text.
func insertAt(src, mark, text string) string {
	line := "\n" + mark + "\n"
	if !strings.Contains(src, line) {
		panic("padlock/redis: a script has no line \"" + mark + "\"")
	}
	return strings.Replace(src, line, "\n"+text+"\n", 1)
}
