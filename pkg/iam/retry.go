package iam

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/aws/smithy-go"
)

// Backoff bounds the retries of one AWS call on throttling and on IAM's
// eventual consistency (a role or policy created a moment ago not yet found).
type Backoff struct {
	// Attempts is the total number of tries (default 8).
	Attempts int
	// Base is the first delay, doubled per try with full jitter (default 500ms).
	Base time.Duration
	// Max caps one delay (default 20s).
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Attempts <= 0 {
		b.Attempts = 8
	}
	if b.Base <= 0 {
		b.Base = 500 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 20 * time.Second
	}
	return b
}

// throttleCodes are the error codes AWS services return when throttling.
var throttleCodes = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true,
	"RequestLimitExceeded": true, "TooManyRequestsException": true, "RequestThrottled": true,
	"RequestThrottledException": true, "SlowDown": true, "ServiceUnavailable": true,
	"AWS.SimpleQueueService.RequestThrottled": true,
}

// consistencyCodes are the errors that, right after we created the object
// named in the call, mean "not visible yet" rather than "does not exist".
var consistencyCodes = map[string]bool{
	"NoSuchEntity": true, "NoSuchEntityException": true, "MalformedPolicyDocument": true,
	"InvalidParameterException": true, "ResourceNotFoundException": true,
	"AWS.SimpleQueueService.NonExistentQueue": true, "QueueDoesNotExist": true,
}

// ErrorCode returns the AWS error code of err, or "".
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// transient reports a connection that broke mid-request or mid-response.
// Reads are safe to repeat; a repeated create that had in fact succeeded
// answers "already exists", which Apply resolves by reading the object.
func transient(err error) bool {
	var op *net.OpError
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &op)
}

// retry runs fn until it succeeds, fails with an error that is not
// retryable, or the attempts run out. consistency also retries the errors
// that IAM's eventual consistency produces.
func retry(ctx context.Context, b Backoff, consistency bool, fn func() error) error {
	b = b.withDefaults()
	delay := b.Base
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil {
			return nil
		}
		code := ErrorCode(err)
		retryable := throttleCodes[code] || (consistency && consistencyCodes[code]) || transient(err)
		if !retryable || attempt >= b.Attempts {
			return err
		}
		// Full jitter: a random delay in [delay/2, delay].
		sleep := delay/2 + time.Duration(rand.Int64N(int64(delay/2)+1))
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, b.Max)
	}
}
