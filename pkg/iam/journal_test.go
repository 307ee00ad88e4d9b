package iam

import (
	"os"
	"strings"
	"testing"
)

func TestJournalFile(t *testing.T) {
	path := t.TempDir() + "/j.json"
	j, err := ReadJournal(path, "prod")
	if err != nil || len(j.Entries) != 0 {
		t.Fatalf("missing journal = %+v, %v", j, err)
	}
	j.Entries = append(j.Entries, JournalEntry{Ref: Ref{Kind: KindQueue, Name: "prod"}, Action: ActionCreate})
	if err := j.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJournal(path, "prod")
	if err != nil || len(back.Entries) != 1 || back.Entries[0].Kind != KindQueue {
		t.Errorf("read back %+v, %v", back, err)
	}
	if _, err := ReadJournal(path, "staging"); err == nil || !strings.Contains(err.Error(), "not \"staging\"") {
		t.Errorf("journal of another cluster accepted: %v", err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(path, "prod"); err == nil {
		t.Error("corrupt journal accepted")
	}
}
