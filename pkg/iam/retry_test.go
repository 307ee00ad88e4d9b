package iam

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/aws/smithy-go"
)

func TestRetry(t *testing.T) {
	apiErr := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "x"} }
	tests := []struct {
		name        string
		err         error
		consistency bool
		wantCalls   int
	}{
		{"throttling", apiErr("Throttling"), false, 4},
		{"sqs throttling", apiErr("RequestThrottled"), false, 4},
		{"not found after create", apiErr("NoSuchEntity"), true, 4},
		{"not found on a plain read", apiErr("NoSuchEntity"), false, 1},
		{"broken connection", fmt.Errorf("deserialization failed: %w", &net.OpError{Op: "read", Err: net.ErrClosed}), false, 4},
		{"truncated body", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false, 4},
		{"access denied", apiErr("AccessDenied"), true, 1},
		{"plain error", errors.New("boom"), true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retry(context.Background(), Backoff{Attempts: 4, Base: time.Microsecond}, tt.consistency, func() error {
				calls++
				return tt.err
			})
			if calls != tt.wantCalls || !errors.Is(err, tt.err) {
				t.Errorf("calls = %d (want %d), err = %v", calls, tt.wantCalls, err)
			}
		})
	}
	t.Run("succeeds after throttling", func(t *testing.T) {
		calls := 0
		err := retry(context.Background(), Backoff{Attempts: 4, Base: time.Microsecond}, false, func() error {
			if calls++; calls < 3 {
				return apiErr("ThrottlingException")
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Errorf("calls = %d, err = %v", calls, err)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := retry(ctx, Backoff{Attempts: 10, Base: time.Hour}, false, func() error { return apiErr("Throttling") })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}
