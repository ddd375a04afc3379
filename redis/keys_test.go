package redis

import "testing"

// The shared renewal scripts (renew_many.lua, renew_any_slot.lua) name a
// hold's holds and tokens keys from its lock key: everything but its last
// four bytes ("lock"), then "holds" or "tokens". keysFor must build them
// so, whatever the prefix and the name.
func TestRenewKeysFromLockKey(t *testing.T) {
	for _, tc := range []struct{ prefix, name string }{
		{DefaultPrefix, "orders/42"},
		{"p", ""},
		{"a:{b}", "x{y}z:lock"},
		{DefaultPrefix, "名前"},
	} {
		k := keysFor(tc.prefix, tc.name)
		base := k.lock[:len(k.lock)-len("lock")]
		if k.lock != base+"lock" || k.holds != base+"holds" || k.tokens != base+"tokens" {
			t.Errorf("keysFor(%q, %q): lock %q, holds %q, tokens %q: not one base with the suffixes the scripts append",
				tc.prefix, tc.name, k.lock, k.holds, k.tokens)
		}
	}
}
