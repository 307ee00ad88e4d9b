package awsauth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

var cluster = testenv.NewShared(testenv.Options{})

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

func awsAuth(mapRoles string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, ResourceVersion: "7"},
		Data:       map[string]string{KeyMapRoles: mapRoles, KeyMapUsers: "- userarn: arn:aws:iam::1:user/ops\n  username: ops\n", "other": "kept"},
	}
}

func fixedNow() time.Time { return time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC) }

func TestEditorEnsureAndRemove(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(awsAuth(eksctlMapRoles))
	dir := t.TempDir()
	ed := &Editor{Client: client, BackupNamespace: "karpenter-migrate", BackupDir: dir, Now: fixedNow}

	if err := ed.Ensure(ctx, nodeRole); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cm.Data[KeyMapRoles], eksctlMapRoles) || !strings.Contains(cm.Data[KeyMapRoles], nodeRole.RoleARN) {
		t.Errorf("mapRoles after Ensure:\n%s", cm.Data[KeyMapRoles])
	}
	if cm.Data["other"] != "kept" || cm.Data[KeyMapUsers] != awsAuth("").Data[KeyMapUsers] {
		t.Errorf("other keys changed: %v", cm.Data)
	}
	backups, err := client.CoreV1().ConfigMaps("karpenter-migrate").List(ctx, metav1.ListOptions{LabelSelector: BackupLabel + "=true"})
	if err != nil || len(backups.Items) != 1 || backups.Items[0].Data[KeyMapRoles] != eksctlMapRoles {
		t.Fatalf("backup ConfigMap: %v, %+v", err, backups)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "aws-auth-backup-*.json"))
	if len(files) != 1 {
		t.Fatalf("local backups = %v, want one", files)
	}

	st, err := ed.Lookup(ctx, nodeRole)
	if err != nil || !st.Ours || !st.Matches {
		t.Errorf("Lookup = %+v, %v", st, err)
	}
	removed, err := ed.Remove(ctx, nodeRole)
	if err != nil || !removed {
		t.Fatalf("Remove: %v, %v", removed, err)
	}
	cm, _ = client.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if cm.Data[KeyMapRoles] != eksctlMapRoles {
		t.Errorf("mapRoles after Remove:\n%q\nwant\n%q", cm.Data[KeyMapRoles], eksctlMapRoles)
	}
	if removed, err := ed.Remove(ctx, nodeRole); err != nil || removed {
		t.Errorf("second Remove = %v, %v; want false, nil", removed, err)
	}
}

func TestEditorCreatesMissingAWSAuth(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	ed := &Editor{Client: client}
	if err := ed.Ensure(ctx, nodeRole); err != nil {
		t.Fatal(err)
	}
	st, err := ed.Lookup(ctx, nodeRole)
	if err != nil || !st.Present || !st.Ours {
		t.Errorf("Lookup = %+v, %v", st, err)
	}
}

func TestEditorNeverWritesMalformed(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(awsAuth("- rolearn: arn:aws:iam::1:role/a\n  username: a\n  groups: a: b\n"))
	ed := &Editor{Client: client, BackupNamespace: "karpenter-migrate"}
	err := ed.Ensure(ctx, nodeRole)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("Ensure = %v, want a ParseError at line 3", err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("malformed aws-auth led to a %s of %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestEditorReportsConflict(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(awsAuth(eksctlMapRoles))
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, Name, errors.New("the object has been modified"))
	})
	err := (&Editor{Client: client}).Ensure(ctx, nodeRole)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Ensure = %v, want ErrConflict", err)
	}
}

// TestEditorAgainstAPIServer runs the edit against a real API server: the
// resourceVersion precondition is enforced there, not simulated.
func TestEditorAgainstAPIServer(t *testing.T) {
	env := cluster.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := env.Client
	orig := awsAuth(eksctlMapRoles)
	orig.ResourceVersion = ""
	if _, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, orig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().ConfigMaps(Namespace).Delete(context.Background(), Name, metav1.DeleteOptions{})
	})
	ed := &Editor{Client: client, BackupNamespace: "karpenter-migrate-test", BackupDir: t.TempDir()}

	if err := ed.Ensure(ctx, nodeRole); err != nil {
		t.Fatal(err)
	}
	if err := ed.Ensure(ctx, nodeRole); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	got := get(ctx, t, client)
	if n := strings.Count(got.Data[KeyMapRoles], nodeRole.RoleARN); n != 1 {
		t.Errorf("role mapped %d times after two Ensures", n)
	}

	// A concurrent edit between read and write is detected, not overwritten.
	stale := get(ctx, t, client)
	concurrent := stale.DeepCopy()
	concurrent.Data["mapAccounts"] = "- \"444455556666\"\n"
	if _, err := client.CoreV1().ConfigMaps(Namespace).Update(ctx, concurrent, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	removedText, _, err := Remove(stale.Data[KeyMapRoles], nodeRole)
	if err != nil {
		t.Fatal(err)
	}
	if err := ed.write(ctx, stale, removedText); !errors.Is(err, ErrConflict) {
		t.Fatalf("write over a concurrent edit = %v, want ErrConflict", err)
	}
	if got := get(ctx, t, client); got.Data["mapAccounts"] == "" || !strings.Contains(got.Data[KeyMapRoles], nodeRole.RoleARN) {
		t.Fatalf("concurrent edit was overwritten: %v", got.Data)
	}

	removed, err := ed.Remove(ctx, nodeRole)
	if err != nil || !removed {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	final := get(ctx, t, client)
	if final.Data[KeyMapRoles] != eksctlMapRoles || final.Data["other"] != "kept" || final.Data["mapAccounts"] == "" {
		t.Errorf("after Remove: %q", final.Data)
	}
	backups, err := client.CoreV1().ConfigMaps("karpenter-migrate-test").List(ctx, metav1.ListOptions{LabelSelector: BackupLabel})
	if err != nil || len(backups.Items) == 0 {
		t.Errorf("no backup ConfigMaps in the tool namespace: %v", err)
	}
}

func get(ctx context.Context, t *testing.T, c kubernetes.Interface) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
