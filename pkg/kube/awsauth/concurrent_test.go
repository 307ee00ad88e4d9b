package awsauth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// writerEntry is the mapRoles item another tool adds in round i.
func writerEntry(i int) string {
	return fmt.Sprintf("- rolearn: arn:aws:iam::111122223333:role/other-tool-%d\n  username: other-%d\n  groups:\n  - team-%d\n", i, i, i)
}

// otherWriter is another tool editing aws-auth as a careful one does: read,
// change, write with the read resourceVersion, again on conflict. Round i
// adds its entry i and removes its entry i-2. It returns how many of its
// writes met a conflict.
func otherWriter(ctx context.Context, c kubernetes.Interface, i int) (conflicts int, err error) {
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cm, err := c.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		text := cm.Data[KeyMapRoles]
		if i >= 2 {
			text = strings.Replace(text, writerEntry(i-2), "", 1)
		}
		cm.Data[KeyMapRoles] = text + writerEntry(i)
		_, err = c.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			conflicts++
		}
		return err
	})
	return conflicts, err
}

// TestChaosAWSAuthConcurrentWriter is rung 6 of the chaos ladder (#19): for 100
// rounds another tool adds and removes its entries while the editor adds
// (odd rounds) or removes (even rounds) ours, both starting at the same
// moment against the real API server. Every entry the other tool meant to
// keep survives, the entries that were there before are untouched, ours is
// present exactly once after each add and gone after each remove, and a
// resourceVersion conflict is read again and retried, never overwritten
// nor returned.
func TestChaosAWSAuthConcurrentWriter(t *testing.T) {
	env := cluster.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := env.Client
	orig := awsAuth(eksctlMapRoles)
	orig.ResourceVersion = ""
	if _, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, orig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const backupNS = "karpenter-migrate-concurrent"
	t.Cleanup(func() {
		_ = client.CoreV1().ConfigMaps(Namespace).Delete(context.Background(), Name, metav1.DeleteOptions{})
		_ = client.CoreV1().Namespaces().Delete(context.Background(), backupNS, metav1.DeleteOptions{})
	})
	ed := &Editor{Client: client, BackupNamespace: backupNS}

	const rounds = 100
	writerConflicts, ours := 0, 0
	for i := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		var werr error
		var wc int
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			wc, werr = otherWriter(ctx, client, i)
		}()
		close(start)
		add := i%2 == 1
		var err error
		if add {
			err = ed.Ensure(ctx, nodeRole)
		} else {
			_, err = ed.Remove(ctx, nodeRole)
		}
		wg.Wait()
		writerConflicts += wc
		if werr != nil {
			t.Fatalf("round %d: the other writer: %v", i, werr)
		}
		if err != nil {
			t.Fatalf("round %d: our edit (add %t) with another writer at the same moment: %v", i, add, err)
		}
		text := get(ctx, t, client).Data[KeyMapRoles]
		if !strings.HasPrefix(text, eksctlMapRoles) {
			t.Fatalf("round %d: the entries that were there before changed:\n%s", i, text)
		}
		for j := range i + 1 {
			if want := j >= i-1; strings.Contains(text, writerEntry(j)) != want {
				t.Fatalf("round %d: the other tool's entry %d present %t, want %t:\n%s", i, j, !want, want, text)
			}
		}
		n := strings.Count(text, nodeRole.RoleARN)
		if add && n != 1 || !add && n != 0 {
			t.Fatalf("round %d: our role mapped %d times after %s:\n%s", i, n, map[bool]string{true: "Ensure", false: "Remove"}[add], text)
		}
		if add {
			ours++
		}
	}
	backups, err := client.CoreV1().ConfigMaps(backupNS).List(ctx, metav1.ListOptions{LabelSelector: BackupLabel})
	if err != nil {
		t.Fatal(err)
	}
	// Each of our writes backs up first: backups beyond one per write are
	// attempts that met a conflict and were read again.
	writes := rounds - 1 // round 0 removes what is not there
	t.Logf("CHAOS rung 6 aws-auth edited concurrently: %d rounds, 0 entries lost, ours added %d times (once each), "+
		"the other writer met %d conflicts, we retried %d writes after a conflict", rounds, ours, writerConflicts, len(backups.Items)-writes)
	if writerConflicts+len(backups.Items)-writes == 0 {
		t.Errorf("no conflict in %d rounds: the writers never overlapped, so the test proved nothing", rounds)
	}
}
