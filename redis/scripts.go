package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT
// (goredis.Script.Run does both). Every mutating script checks the hold's
// unique id first, so a stale call never touches a newer hold.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/fair_acquire.lua
	fairAcquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/cancel.lua
	cancelSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string

	acquireScript     = goredis.NewScript(acquireSrc)
	fairAcquireScript = goredis.NewScript(fairAcquireSrc)
	releaseScript     = goredis.NewScript(releaseSrc)
	renewScript       = goredis.NewScript(renewSrc)
	cancelScript      = goredis.NewScript(cancelSrc)
	inspectScript     = goredis.NewScript(inspectSrc)
)
