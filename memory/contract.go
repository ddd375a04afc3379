package memory

import "github.com/padlock-go/padlock/backends"

// The driver contract and the optional interfaces this backend offers,
// checked when it compiles: a change that dropped one would otherwise
// quietly cost renewal batching (BatchRenewer), LockAll in one request
// (MultiAcquirer), early loss notice (LossNotifier) or the operator's view
// (Inspector, ForceReleaser, which the portable API would then answer with
// ErrUnsupported).
var (
	_ backends.Driver        = (*driver)(nil)
	_ backends.Hold          = (*hold)(nil)
	_ backends.Sharer        = (*hold)(nil)
	_ backends.Proclaimer    = (*hold)(nil)
	_ backends.Elector       = (*driver)(nil)
	_ backends.Watcher       = (*driver)(nil)
	_ backends.Inspector     = (*driver)(nil)
	_ backends.ForceReleaser = (*driver)(nil)
	_ backends.MultiAcquirer = (*driver)(nil)
)
