package driverkit

import "testing"

// ClusterSlot agrees with CRC-16/XMODEM's check value and with the slots
// Redis's own documentation gives for CLUSTER KEYSLOT; a hash tag decides
// the slot, an empty one does not.
func TestClusterSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, slot := range map[string]int{"foo": 12182, "somekey": 11058, "foo{hash_tag}": 2515,
		"{user1000}.following": ClusterSlot("user1000"), "{}x": int(crc16("{}x")) % ClusterSlots, "a{b}c{d}": ClusterSlot("b")} {
		if got := ClusterSlot(key); got != slot {
			t.Errorf("ClusterSlot(%q) = %d, want %d", key, got, slot)
		}
	}
}
