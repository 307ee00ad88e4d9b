// Package aws builds the aws-sdk-go-v2 configuration and service clients the
// tool uses: the default credential chain (profiles, SSO, environment, web
// identity, IMDS), --region, --profile and --endpoint-url, the adaptive
// retryer with each retry said as it happens and an endpoint it cannot
// connect to given up on after --aws-connect-timeout, and access denials,
// missing credentials and non-AWS answers rewritten to say what to do.
//
// Consumers declare the narrow interfaces they need (see pkg/discover); the
// SDK clients built here satisfy them, and so do in-memory fakes.
package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Options select the account, region and endpoint.
type Options struct {
	// Region overrides AWS_REGION and the profile's region.
	Region string
	// Profile names a shared config profile.
	Profile string
	// EndpointURL sends every call to this endpoint (VPC endpoints, the
	// sandbox's awsfake); it is set as each client's BaseEndpoint.
	EndpointURL string
	// Credentials replaces the default credential chain (sandbox, tests).
	Credentials awssdk.CredentialsProvider
	// MaxAttempts is the retryer's attempt limit (default 5).
	MaxAttempts int
	// RetryMode is adaptive (the default: client-side rate limiting that
	// backs off under throttling) or standard.
	RetryMode awssdk.RetryMode
	// MaxBackoff caps the retry delay (default 20s; tests use milliseconds).
	MaxBackoff time.Duration
	// RideOutThrottling is for a long run (apply, rollback) that must
	// outlast a throttling storm: 15 attempts per call (about two minutes of
	// backoff) and no client-side retry quota, which a storm would empty
	// and then fail calls without retrying them.
	RideOutThrottling bool
	// ConnectTimeout bounds how long one call keeps retrying an endpoint
	// it cannot connect to, within its attempts (default
	// DefaultConnectTimeout); a connection failure is not throttling, so
	// RideOutThrottling does not lengthen it. It also caps the time to
	// dial one connection (at most 10s).
	ConnectTimeout time.Duration
	// Logger receives each retry as it happens and the SDK's own log lines
	// (at debug); nil discards them.
	Logger *slog.Logger
	// HTTPClient replaces the SDK's default HTTP client.
	HTTPClient *http.Client
}

// LoadConfig loads the SDK configuration with config.LoadDefaultConfig and
// the adaptive retryer.
func LoadConfig(ctx context.Context, o Options) (awssdk.Config, error) {
	attempts := o.MaxAttempts
	if attempts == 0 {
		attempts = 5
		if o.RideOutThrottling {
			attempts = 15
		}
	}
	connect := o.ConnectTimeout
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	loaders := []func(*config.LoadOptions) error{
		config.WithLogger(sdkLogger(log)),
		config.WithRetryer(func() awssdk.Retryer {
			std := func(so *retry.StandardOptions) {
				so.MaxAttempts = attempts
				if o.RideOutThrottling {
					so.RateLimiter = ratelimit.None
				}
				if o.MaxBackoff > 0 {
					so.MaxBackoff = o.MaxBackoff
					so.Backoff = retry.NewExponentialJitterBackoff(o.MaxBackoff)
				}
			}
			if o.RetryMode == awssdk.RetryModeStandard {
				return retry.NewStandard(std)
			}
			return retry.NewAdaptiveMode(func(ao *retry.AdaptiveModeOptions) {
				ao.StandardOptions = append(ao.StandardOptions, std)
			})
		}),
	}
	if o.Region != "" {
		loaders = append(loaders, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		loaders = append(loaders, config.WithSharedConfigProfile(o.Profile))
	}
	if o.Credentials != nil {
		loaders = append(loaders, config.WithCredentialsProvider(o.Credentials))
	}
	if o.HTTPClient != nil {
		loaders = append(loaders, config.WithHTTPClient(o.HTTPClient))
	} else {
		loaders = append(loaders, config.WithHTTPClient(awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = min(d.Timeout, connect, 10*time.Second)
		})))
	}
	if o.EndpointURL != "" {
		loaders = append(loaders, config.WithBaseEndpoint(o.EndpointURL))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("load AWS configuration (check --profile, AWS_PROFILE and ~/.aws/config): %w", err)
	}
	if cfg.Region == "" {
		return awssdk.Config{}, errors.New("no AWS region: pass --region, set AWS_REGION, or set region in the profile")
	}
	if o.Credentials == nil && cfg.Credentials != nil {
		cfg.Credentials = explainedCredentials{CredentialsProvider: cfg.Credentials, profile: profileName(o.Profile), log: log}
	}
	cfg.APIOptions = append(cfg.APIOptions, explainDenials, explainNonAWSAnswers, explainRetries(log, attempts, connect))
	cfg.HTTPClient = bodyWithoutWriterTo{cfg.HTTPClient}
	return cfg, nil
}

// bodyWithoutWriterTo sends requests with a body that offers only Read and
// Close. It works around a race between smithy-go and net/http: smithy
// closes the request body as soon as Do returns, and the WriteTo of its
// closed body answers io.EOF as an error. When the response arrives before
// net/http's writer has probed the body for its end (a nearby endpoint:
// loopback, a VPC endpoint), the writer takes that for a failed write and
// closes the connection under the response being read; the SDK then logs
// "failed to discard remaining HTTP response body ... use of closed network
// connection" and retries an operation the service already ran. Through
// Read the probe gets a clean io.EOF.
type bodyWithoutWriterTo struct{ awssdk.HTTPClient }

type readCloserOnly struct{ io.ReadCloser }

func (c bodyWithoutWriterTo) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req = req.WithContext(req.Context()) // a shallow copy: never change the caller's request
		req.Body = readCloserOnly{req.Body}
	}
	return c.HTTPClient.Do(req)
}

// Clients are the SDK clients for one account and region.
type Clients struct {
	EC2         *ec2.Client
	AutoScaling *autoscaling.Client
	EKS         *eks.Client
	STS         *sts.Client
	SSM         *ssm.Client
}

// NewClients builds every client from cfg.
func NewClients(cfg awssdk.Config) *Clients {
	return &Clients{
		EC2:         ec2.NewFromConfig(cfg),
		AutoScaling: autoscaling.NewFromConfig(cfg),
		EKS:         eks.NewFromConfig(cfg),
		STS:         sts.NewFromConfig(cfg),
		SSM:         ssm.NewFromConfig(cfg),
	}
}

// AccessDeniedError is an AWS permission denial with the IAM action the
// caller lacks.
type AccessDeniedError struct {
	// Action is the IAM action, e.g. autoscaling:DescribeAutoScalingGroups.
	Action string
	Err    error
}

func (e *AccessDeniedError) Error() string {
	return fmt.Sprintf("%s denied: grant it to the caller (%v)", e.Action, e.Err)
}

func (e *AccessDeniedError) Unwrap() error { return e.Err }

// denialCodes are the error codes AWS services use for a missing permission.
var denialCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "UnauthorizedOperation": true,
	"UnauthorizedAccess": true, "AccessDeniedFault": true,
}

// iamPrefixes maps SDK service IDs to IAM action prefixes.
var iamPrefixes = map[string]string{
	"EC2": "ec2", "Auto Scaling": "autoscaling", "EKS": "eks", "STS": "sts", "SSM": "ssm",
	"IAM": "iam", "SQS": "sqs", "EventBridge": "events", "Pricing": "pricing",
}

// IAMAction names the IAM action for an SDK service ID and operation.
func IAMAction(serviceID, operation string) string {
	prefix, ok := iamPrefixes[serviceID]
	if !ok {
		prefix = strings.ToLower(strings.ReplaceAll(serviceID, " ", ""))
	}
	return prefix + ":" + operation
}

// explainDenials adds, to every client, a middleware that turns an access
// denial into an *AccessDeniedError naming the IAM action.
func explainDenials(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("karpenter-migrate/ExplainDenials",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			var api smithy.APIError
			if err != nil && errors.As(err, &api) && denialCodes[api.ErrorCode()] {
				err = &AccessDeniedError{Action: IAMAction(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)), Err: err}
			}
			return out, md, err
		}), middleware.Before)
}

// NotAWSError is an error answer that is not an AWS error: an HTML page
// from a server or proxy that does not serve the API (an emulator without
// it, a wrong --endpoint-url, a captive portal).
type NotAWSError struct {
	// Endpoint is the scheme and host that answered; Method and Path the request.
	Endpoint, Method, Path string
	StatusCode             int
	ContentType            string
	Err                    error
}

func (e *NotAWSError) Error() string {
	return fmt.Sprintf("%s answered %s %s with HTTP %d and a %s page, not an AWS error: that endpoint does not serve this API (check --endpoint-url and any proxy; an emulator may lack the operation)",
		e.Endpoint, e.Method, e.Path, e.StatusCode, e.ContentType)
}

func (e *NotAWSError) Unwrap() error { return e.Err }

// explainNonAWSAnswers adds, to every client, a middleware that turns an
// error answered with an HTML body into a *NotAWSError naming the endpoint;
// the SDK alone reports such an answer as an unknown or undecodable error.
// The operation is named by the SDK's own wrapping.
func explainNonAWSAnswers(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("karpenter-migrate/ExplainNonAWSAnswers",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err == nil {
				return out, md, nil
			}
			resp, ok := out.RawResponse.(*smithyhttp.Response)
			req, rok := in.Request.(*smithyhttp.Request)
			if !ok || !rok || resp.Response == nil || resp.StatusCode < 300 {
				return out, md, err
			}
			ct := resp.Header.Get("Content-Type")
			if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/html") {
				return out, md, err
			}
			return out, md, &NotAWSError{
				Endpoint: req.URL.Scheme + "://" + req.URL.Host, Method: req.Method, Path: req.URL.EscapedPath(),
				StatusCode: resp.StatusCode, ContentType: "text/html", Err: err,
			}
		}), middleware.Before)
}
