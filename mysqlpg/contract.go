package mysqlpg

import "github.com/padlock-go/padlock/backends"

// The driver contract and the optional interfaces this backend offers,
// checked when it compiles: a change that dropped one would otherwise
// quietly cost renewal batching (BatchRenewer), LockAll in one request
// (MultiAcquirer, lease mode), early loss notice (LossNotifier) or the
// operator's view (Inspector, ForceReleaser, which
// the portable API would then answer with ErrUnsupported).
//
// An advisory hold's session can die between renewals, and the server
// then frees its locks at once: its early notice is what keeps Done
// within a round trip of that.
var (
	_ backends.Driver        = (*driver)(nil)
	_ backends.Hold          = (*leaseHold)(nil)
	_ backends.Hold          = (*advHold)(nil)
	_ backends.LossNotifier  = (*advHold)(nil)
	_ backends.BatchRenewer  = (*driver)(nil)
	_ backends.Inspector     = (*driver)(nil)
	_ backends.ForceReleaser = (*driver)(nil)
	_ backends.Sharer        = (*leaseHold)(nil)
	_ backends.Sharer        = (*advHold)(nil)
	_ backends.MultiAcquirer = (*driver)(nil)
)
