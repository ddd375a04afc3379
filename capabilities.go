package padlock

import "github.com/padlock-go/padlock/backends"

// Capabilities are the guarantees of a Locker's backend configuration, as
// checked by the conformance suite and measured under injected faults by
// the fault suite (padlock faults); see docs/guarantees.md. Whether Done
// comes first (DoneBeforeRegrant) holds under the assumptions of
// docs/lost-lock.md, which lists the measured exceptions.
type Capabilities = backends.Capabilities

// Consistency is CP or AP.
type Consistency = backends.Consistency

// Tristate is Yes, No or Unknown: a guarantee that the server's own
// configuration may decide (Capabilities.HoldsSurviveRestart).
type Tristate = backends.Tristate

// Tristate values, re-exported from package backends.
const (
	// Unknown: the guarantee depends on what padlock could not read.
	Unknown = backends.Unknown
	// Yes: the guarantee holds.
	Yes = backends.Yes
	// No: the guarantee does not hold.
	No = backends.No
)

// Consistency models, re-exported from package backends.
const (
	// CP: mutual exclusion survives partitions and failovers.
	CP = backends.CP
	// AP: available under some faults, may grant a lock twice.
	AP = backends.AP
)
