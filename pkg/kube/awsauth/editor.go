package awsauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

// Where aws-auth lives.
const (
	Namespace = "kube-system"
	Name      = "aws-auth"
	// BackupLabel marks the backup copies in the tool's namespace.
	BackupLabel = "karpenter-migrate.io/aws-auth-backup"
)

// ErrConflict is returned when aws-auth kept changing between read and
// write (Ensure and Remove retry it a few times first).
var ErrConflict = errors.New("aws-auth was changed by someone else since it was read; nothing was written, run again")

// Editor reads and edits aws-auth in a live cluster. Every write is
// preceded by a backup (a ConfigMap copy in BackupNamespace and a local file
// in BackupDir) and made with the read resourceVersion as precondition.
type Editor struct {
	Client kubernetes.Interface
	// BackupNamespace is the tool's namespace (created when missing).
	BackupNamespace string
	// BackupDir receives a JSON copy before every write; empty skips it.
	BackupDir string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (ed *Editor) now() time.Time {
	if ed.Now != nil {
		return ed.Now()
	}
	return time.Now()
}

func (ed *Editor) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := ed.Client.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", Namespace, Name, err)
	}
	return cm, nil
}

// Lookup reports what aws-auth holds for e's role; a malformed aws-auth is
// an error naming the key and line.
func (ed *Editor) Lookup(ctx context.Context, e MapRole) (Status, error) {
	cm, err := ed.get(ctx)
	if err != nil || cm == nil {
		return Status{}, err
	}
	if err := Validate(cm.Data); err != nil {
		return Status{}, err
	}
	return Lookup(cm.Data[KeyMapRoles], e)
}

// onConflict runs edit again, from a fresh read, while another writer
// changed aws-auth between its read and its write (client-go's
// RetryOnConflict backoff): their change is kept and ours made on top.
func onConflict(edit func() error) error {
	return retry.OnError(retry.DefaultBackoff, func(err error) bool { return errors.Is(err, ErrConflict) }, edit)
}

// Ensure adds e to mapRoles unless its role is already mapped. aws-auth is
// created when the cluster has none. A concurrent write is read again and
// the merge retried.
func (ed *Editor) Ensure(ctx context.Context, e MapRole) error {
	return onConflict(func() error { return ed.ensure(ctx, e) })
}

func (ed *Editor) ensure(ctx context.Context, e MapRole) error {
	cm, err := ed.get(ctx)
	if err != nil {
		return err
	}
	if cm == nil {
		text, _, err := Merge("", e)
		if err != nil {
			return err
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name},
			Data:       map[string]string{KeyMapRoles: text},
		}
		_, err = ed.Client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return ErrConflict
		}
		return wrapWrite(err)
	}
	if err := Validate(cm.Data); err != nil {
		return fmt.Errorf("%w (fix aws-auth by hand; nothing was written)", err)
	}
	text, changed, err := Merge(cm.Data[KeyMapRoles], e)
	if err != nil || !changed {
		return err
	}
	return ed.write(ctx, cm, text)
}

// Remove deletes the entry Ensure added and reports whether there was one.
// Entries not written by this tool are kept. A concurrent write is read
// again and the removal retried.
func (ed *Editor) Remove(ctx context.Context, e MapRole) (removed bool, err error) {
	err = onConflict(func() error {
		removed, err = ed.remove(ctx, e)
		return err
	})
	return removed, err
}

func (ed *Editor) remove(ctx context.Context, e MapRole) (bool, error) {
	cm, err := ed.get(ctx)
	if err != nil || cm == nil {
		return false, err
	}
	if err := Validate(cm.Data); err != nil {
		return false, fmt.Errorf("%w (fix aws-auth by hand; nothing was written)", err)
	}
	text, changed, err := Remove(cm.Data[KeyMapRoles], e)
	if err != nil || !changed {
		return false, err
	}
	return true, ed.write(ctx, cm, text)
}

func (ed *Editor) write(ctx context.Context, cm *corev1.ConfigMap, mapRoles string) error {
	if err := ed.backup(ctx, cm); err != nil {
		return err
	}
	next := cm.DeepCopy()
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[KeyMapRoles] = mapRoles
	// next carries the read resourceVersion: the API server refuses the
	// update if anyone wrote in between.
	_, err := ed.Client.CoreV1().ConfigMaps(Namespace).Update(ctx, next, metav1.UpdateOptions{})
	return wrapWrite(err)
}

func wrapWrite(err error) error {
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", Namespace, Name, err)
	}
	return nil
}

// backup stores cm as it was read: a local JSON file and a ConfigMap copy
// in the tool's namespace.
func (ed *Editor) backup(ctx context.Context, cm *corev1.ConfigMap) error {
	stamp := ed.now().UTC().Format("20060102-150405")
	name := fmt.Sprintf("aws-auth-backup-%s-rv%s", stamp, cm.ResourceVersion)
	if ed.BackupDir != "" {
		b, err := json.MarshalIndent(cm, "", "  ")
		if err != nil {
			return fmt.Errorf("back up aws-auth: %w", err)
		}
		path := filepath.Join(ed.BackupDir, name+".json")
		if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("back up aws-auth to %s: %w", path, err)
		}
	}
	if ed.BackupNamespace == "" {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ed.BackupNamespace}}
	if _, err := ed.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("back up aws-auth: create namespace %s: %w", ed.BackupNamespace, err)
	}
	cp := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ed.BackupNamespace, Name: name,
			Labels:      map[string]string{BackupLabel: "true"},
			Annotations: map[string]string{"karpenter-migrate.io/source-resource-version": cm.ResourceVersion},
		},
		Data: cm.Data, BinaryData: cm.BinaryData,
	}
	if _, err := ed.Client.CoreV1().ConfigMaps(ed.BackupNamespace).Create(ctx, cp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("back up aws-auth to %s/%s: %w", ed.BackupNamespace, name, err)
	}
	return nil
}
