package redis

import "github.com/padlock-go/padlock/backends"

// The driver contract and the optional interfaces this backend offers,
// checked when it compiles: a change that dropped one would otherwise
// quietly cost renewal batching (BatchRenewer), LockAll in one request
// (MultiAcquirer, not on RedLock), early loss notice
// (LossNotifier), the operator's view (Inspector, ForceReleaser, which
// the portable API would then answer with ErrUnsupported) or the
// downgrade of a writer to a reader (Sharer).
var (
	_ backends.Driver        = (*driver)(nil)
	_ backends.Hold          = (*hold)(nil)
	_ backends.BatchRenewer  = (*driver)(nil)
	_ backends.Inspector     = (*driver)(nil)
	_ backends.ForceReleaser = (*driver)(nil)
	_ backends.Sharer        = (*hold)(nil)
	_ backends.MultiAcquirer = (*driver)(nil)

	_ backends.Driver        = (*redlock)(nil)
	_ backends.Hold          = (*redlockHold)(nil)
	_ backends.BatchRenewer  = (*redlock)(nil)
	_ backends.Inspector     = (*redlock)(nil)
	_ backends.ForceReleaser = (*redlock)(nil)
	_ backends.Sharer        = (*redlockHold)(nil)
)
