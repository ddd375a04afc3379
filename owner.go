package padlock

import "context"

type ownerKey struct{}

// WithOwner returns a context that carries owner as the identity for
// reentrancy. Go has no goroutine identity, so padlock asks for one: the
// same owner locking the same name again on the same Locker succeeds at once
// and increments a hold count; the last Unlock releases the lock.
//
// Without an owner every Lock call is its own holder, so two goroutines never
// share a hold by accident. Different owners exclude each other, and so do the
// same owner on two different Lockers. An empty owner means no owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerFrom returns the owner that WithOwner put in ctx, or "" if there is none.
func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}
