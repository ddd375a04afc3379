package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT
// (goredis.Script.Run does both). Every mutating script checks the hold's
// unique id first, so a stale call never touches a newer hold. The
// scripts that see readers and permits start with lib.lua's helpers; the
// mutex's acquire and renew scripts do without, so that their free path
// is what it was before readers and permits.
var (
	//go:embed scripts/lib.lua
	libSrc string
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
	//go:embed scripts/acquire_shared.lua
	acquireSharedSrc string
	//go:embed scripts/share.lua
	shareSrc string

	acquireScript       = goredis.NewScript(acquireSrc)
	fairAcquireScript   = goredis.NewScript(fairAcquireSrc)
	releaseScript       = goredis.NewScript(libSrc + releaseSrc)
	renewScript         = goredis.NewScript(renewSrc)
	cancelScript        = goredis.NewScript(libSrc + cancelSrc)
	inspectScript       = goredis.NewScript(inspectSrc)
	acquireSharedScript = goredis.NewScript(libSrc + acquireSharedSrc)
	shareScript         = goredis.NewScript(libSrc + shareSrc)
)
