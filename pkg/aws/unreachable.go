package aws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DefaultConnectTimeout bounds how long one AWS call keeps trying an
// endpoint it cannot connect to (see Options.ConnectTimeout).
const DefaultConnectTimeout = 20 * time.Second

// UnreachableError is an AWS call that could not connect to its endpoint
// (refused, unreachable, DNS, TLS) for its whole connect budget or all its
// attempts. Throttling is not this: it is retried by the attempt limit alone.
type UnreachableError struct {
	// Service and Operation name the call; Endpoint is where it was sent.
	Service, Operation, Endpoint string
	Attempts                     int
	Waited                       time.Duration
	Err                          error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s %s: could not connect to %s in %d attempt(s) over %s (%v): check --endpoint-url, the network, proxy or VPC endpoint and --region; --aws-connect-timeout waits longer",
		e.Service, e.Operation, e.Endpoint, e.Attempts, e.Waited.Round(time.Millisecond), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RetryableError tells the SDK's retryer not to try again.
func (e *UnreachableError) RetryableError() bool { return false }

// attempts counts one operation's attempts and when it first failed to
// connect; explainRetries keeps it on the operation's stack.
type attempts struct {
	n           int
	firstFailed time.Time
}

type attemptsKey struct{}

// explainRetries adds, to every client, middlewares that say at once that a
// call is being retried (warn for an endpoint it cannot connect to, debug
// for any other retryable failure), with the attempt and the limit, and
// end a call that could not connect for budget with an *UnreachableError.
// The SDK alone says nothing until its last attempt fails, which for an
// unreachable endpoint was minutes later.
func explainRetries(log *slog.Logger, maxAttempts int, budget time.Duration) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("karpenter-migrate/CountAttempts",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(middleware.WithStackValue(ctx, attemptsKey{}, &attempts{}), in)
			}), middleware.Before); err != nil {
			return err
		}
		// After the retry middleware: once per attempt.
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("karpenter-migrate/ExplainRetries",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleFinalize(ctx, in)
				a, ok := middleware.GetStackValue(ctx, attemptsKey{}).(*attempts)
				if err == nil || !ok || ctx.Err() != nil {
					return out, md, err
				}
				a.n++
				service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				var send *smithyhttp.RequestSendError
				if !errors.As(err, &send) {
					log.Debug(fmt.Sprintf("%s %s: attempt %d of %d failed: %v", service, op, a.n, maxAttempts, err),
						"service", service, "operation", op, "attempt", a.n, "maxAttempts", maxAttempts)
					return out, md, err
				}
				now := time.Now()
				if a.firstFailed.IsZero() {
					a.firstFailed = now
				}
				endpoint := ""
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					endpoint = req.URL.Scheme + "://" + req.URL.Host
				}
				if waited := now.Sub(a.firstFailed); waited >= budget || a.n >= maxAttempts {
					return out, md, &UnreachableError{Service: service, Operation: op, Endpoint: endpoint, Attempts: a.n, Waited: waited, Err: send.Err}
				}
				log.Warn(fmt.Sprintf("%s %s: cannot connect to %s (attempt %d of %d, retrying for up to %s): %v", service, op, endpoint, a.n, maxAttempts, budget, send.Err),
					"service", service, "operation", op, "endpoint", endpoint, "attempt", a.n, "maxAttempts", maxAttempts)
				return out, md, err
			}), "Retry", middleware.After)
	}
}

// sdkLogger routes the SDK's own log lines (among them IMDS's "falling back
// to IMDSv1" while it looks for credentials) to log at debug level: what
// they mean for the user is said by the errors built here.
func sdkLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		log.Debug("aws-sdk-go-v2: "+fmt.Sprintf(format, v...), "classification", string(c))
	})
}

// NoCredentialsError is the default credential chain finding nothing: it
// fell through to EC2 instance metadata, which has no role either.
type NoCredentialsError struct {
	// Profile is the shared config profile that was read.
	Profile string
	Err     error
}

func (e *NoCredentialsError) Error() string {
	return fmt.Sprintf("no AWS credentials: tried the environment (AWS_ACCESS_KEY_ID), profile %q of ~/.aws/config and ~/.aws/credentials (keys, SSO, role), web identity (AWS_WEB_IDENTITY_TOKEN_FILE), the container endpoint and EC2 instance metadata; "+
		"pass --profile or set AWS_PROFILE to a profile with credentials, run `aws sso login --profile NAME` for an SSO profile, or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", e.Profile)
}

func (e *NoCredentialsError) Unwrap() error { return e.Err }

// explainedCredentials says which credential sources were tried, and how
// to provide one, when the default chain found none.
type explainedCredentials struct {
	awssdk.CredentialsProvider
	profile string
	log     *slog.Logger
}

func (c explainedCredentials) Retrieve(ctx context.Context) (awssdk.Credentials, error) {
	creds, err := c.CredentialsProvider.Retrieve(ctx)
	var op *smithy.OperationError
	if err != nil && errors.As(err, &op) && op.ServiceID == "ec2imds" {
		c.log.Debug("default credential chain: " + err.Error())
		return creds, &NoCredentialsError{Profile: c.profile, Err: err}
	}
	return creds, err
}

// profileName is the shared config profile the default chain reads.
func profileName(flag string) string {
	for _, p := range []string{flag, os.Getenv("AWS_PROFILE"), os.Getenv("AWS_DEFAULT_PROFILE")} {
		if p != "" {
			return p
		}
	}
	return "default"
}
