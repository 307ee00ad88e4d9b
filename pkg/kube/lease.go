package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// HeldError is returned by Lock.Acquire when another run holds the Lease.
type HeldError struct {
	Lease     string // namespace/name
	Holder    string
	RenewedAt time.Time
	ExpiresAt time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %q (renewed %s, expires %s unless renewed); "+
		"wait for that run to finish, or for the lease to expire if it died",
		e.Lease, e.Holder, e.RenewedAt.UTC().Format(time.RFC3339), e.ExpiresAt.UTC().Format(time.RFC3339))
}

// ErrLockLost is the cause of a held lock's context when renewal failed
// or another run took the Lease over.
var ErrLockLost = errors.New("lost the rollout lease")

// Lock is a coordination.k8s.io Lease used as a mutex between runs. A
// holder renews it every Duration/3; a Lease not renewed for Duration is
// stale and the next Acquire takes it over.
type Lock struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Identity names this run to the others (operator, host, pid).
	Identity string
	// Duration is how long the Lease stays valid without renewal.
	Duration time.Duration
	Clock    clock.WithTicker
}

// Held is an acquired Lock. Its Context is cancelled (with ErrLockLost as
// the cause) if the Lease is lost.
type Held struct {
	lock   *Lock
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// Context returns a context that ends when the lock is lost or released.
func (h *Held) Context() context.Context { return h.ctx }

// Acquire takes the Lease or fails with *HeldError naming the holder. It
// takes over a Lease whose holder stopped renewing it. The returned Held
// renews the Lease until Release; ctx bounds the API calls and renewal.
func (l *Lock) Acquire(ctx context.Context) (*Held, error) {
	if l.Duration <= 0 {
		return nil, fmt.Errorf("lease %s/%s: duration must be positive", l.Namespace, l.Name)
	}
	if err := l.tryAcquire(ctx); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancelCause(ctx)
	h := &Held{lock: l, ctx: hctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	// The ticker and the last renewal are read here, not in the goroutine,
	// so that the deadline counts from the acquisition itself.
	go h.renewLoop(l.Clock.NewTicker(l.Duration/3), l.Clock.Now())
	return h, nil
}

func (l *Lock) tryAcquire(ctx context.Context) error {
	leases := l.Client.CoordinationV1().Leases(l.Namespace)
	now := metav1.NewMicroTime(l.Clock.Now())
	secs := int32(l.Duration / time.Second)
	if secs < 1 {
		secs = 1
	}
	for attempt := 0; attempt < 3; attempt++ {
		lease, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if err := EnsureNamespace(ctx, l.Client, l.Namespace); err != nil {
				return err
			}
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace, Labels: map[string]string{LabelManagedBy: FieldManager}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To(l.Identity), LeaseDurationSeconds: ptr.To(secs),
					AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(int32(0)),
				},
			}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("create lease %s/%s: %w", l.Namespace, l.Name, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("get lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder != "" && holder != l.Identity {
			renewed := lease.Spec.RenewTime
			if renewed == nil {
				renewed = lease.Spec.AcquireTime
			}
			dur := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, secs)) * time.Second
			var renewedAt time.Time
			if renewed != nil {
				renewedAt = renewed.Time
			}
			if expires := renewedAt.Add(dur); l.Clock.Now().Before(expires) {
				return &HeldError{Lease: l.Namespace + "/" + l.Name, Holder: holder, RenewedAt: renewedAt, ExpiresAt: expires}
			}
		}
		if holder != l.Identity {
			lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
			lease.Spec.AcquireTime = &now
		}
		lease.Spec.HolderIdentity = ptr.To(l.Identity)
		lease.Spec.LeaseDurationSeconds = ptr.To(secs)
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			continue // someone else wrote it; look again
		}
		if err != nil {
			return fmt.Errorf("take lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return nil
	}
	return fmt.Errorf("take lease %s/%s: it kept changing under us; another run is starting", l.Namespace, l.Name)
}

// renewLoop renews the Lease every Duration/3. A renewal that fails (the
// API server restarting or unreachable) is tried again every second until
// two thirds of Duration have passed since the last one that succeeded —
// well before another run could take the Lease over — and only then is
// the lock lost; a Lease another run holds is lost at once.
func (h *Held) renewLoop(t clock.Ticker, renewed time.Time) {
	defer close(h.done)
	l := h.lock
	defer t.Stop()
	retry := min(time.Second, l.Duration/10)
	for {
		select {
		case <-h.stop:
			return
		case <-h.ctx.Done():
			return
		case <-t.C():
		}
		for {
			err := l.renew(h.ctx)
			if err == nil {
				renewed = l.Clock.Now()
				break
			}
			if errors.Is(err, errTakenOver) || l.Clock.Since(renewed) >= l.Duration*2/3 {
				h.cancel(fmt.Errorf("%w: not renewed for %s: %v", ErrLockLost, l.Clock.Since(renewed).Round(time.Second), err))
				return
			}
			select {
			case <-h.stop:
				return
			case <-h.ctx.Done():
				return
			case <-l.Clock.After(retry):
			}
		}
	}
}

// errTakenOver is a renewal that found another run holding the Lease.
var errTakenOver = errors.New("taken over")

// renew writes a new renewTime; one attempt is bounded by Duration/3 so
// that an API server that accepts connections but never answers does not
// hold the loop past its deadline.
func (l *Lock) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.Duration/3)
	defer cancel()
	leases := l.Client.CoordinationV1().Leases(l.Namespace)
	lease, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != l.Identity {
		return fmt.Errorf("lease %s/%s is now held by %q: %w", l.Namespace, l.Name, holder, errTakenOver)
	}
	now := metav1.NewMicroTime(l.Clock.Now())
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}

// Release stops renewal and frees the Lease if this run still holds it,
// so the next run need not wait for it to expire. ctx bounds the API call
// (use a fresh one after an interrupt).
func (h *Held) Release(ctx context.Context) error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		h.cancel(context.Canceled)
		l := h.lock
		leases := l.Client.CoordinationV1().Leases(l.Namespace)
		lease, gerr := leases.Get(ctx, l.Name, metav1.GetOptions{})
		if gerr != nil {
			err = fmt.Errorf("release lease %s/%s: %w", l.Namespace, l.Name, gerr)
			return
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") != l.Identity {
			return
		}
		lease.Spec.HolderIdentity = nil
		if _, uerr := leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: FieldManager}); uerr != nil {
			err = fmt.Errorf("release lease %s/%s: %w", l.Namespace, l.Name, uerr)
		}
	})
	return err
}
