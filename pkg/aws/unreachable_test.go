package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// closedPort is a loopback address nothing listens on: connecting to it is
// refused at once.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestUnreachableEndpointSaysItRetriesAndGivesUp: a call to an endpoint it
// cannot connect to says so at its first failed attempt (which call, where,
// attempt n of m), and gives up after the connect budget — even with
// apply's 15 attempts for throttling — or after its attempts, with an
// error naming the call, the endpoint and what to check.
func TestUnreachableEndpointSaysItRetriesAndGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         Options
		wantAttempts func(int) bool
		wantLog      string
	}{
		{"budget cuts apply's attempts", Options{RideOutThrottling: true, ConnectTimeout: 300 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
			func(n int) bool { return n > 1 && n < 15 }, "(attempt 1 of 15, retrying for up to 300ms)"},
		{"attempts before the budget", Options{MaxBackoff: time.Millisecond},
			func(n int) bool { return n == 5 }, "(attempt 1 of 5, retrying for up to 20s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := closedPort(t)
			var logs bytes.Buffer
			o := tc.opts
			o.Region, o.EndpointURL = "us-west-2", endpoint
			o.Credentials = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			cfg, err := LoadConfig(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = sts.NewFromConfig(cfg).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
			elapsed := time.Since(start)
			var u *UnreachableError
			if !errors.As(err, &u) {
				t.Fatalf("err = %v, want an UnreachableError", err)
			}
			if !tc.wantAttempts(u.Attempts) || elapsed > 5*time.Second {
				t.Errorf("gave up after %d attempts in %s", u.Attempts, elapsed)
			}
			for _, want := range []string{"STS GetCallerIdentity: could not connect to " + endpoint, "connection refused", "check --endpoint-url", "--aws-connect-timeout"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
			if want := "STS GetCallerIdentity: cannot connect to " + endpoint + " " + tc.wantLog; !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, &logs)
			}
		})
	}
}

// TestThrottlingIsStillRiddenOut: the connect budget does not shorten the
// attempts a throttled call gets (apply's 15); each throttled attempt is
// logged at debug.
func TestThrottlingIsStillRiddenOut(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		if calls.Add(1) <= 6 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
			return
		}
		fmt.Fprint(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/x</Arn><UserId>AID</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	}))
	defer srv.Close()
	var logs bytes.Buffer
	cfg, err := LoadConfig(context.Background(), Options{
		Region: "us-west-2", EndpointURL: srv.URL, RideOutThrottling: true, ConnectTimeout: time.Millisecond, MaxBackoff: time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil || *out.Account != "123456789012" {
		t.Fatalf("GetCallerIdentity after 6 throttles = %v, %v", out, err)
	}
	if !strings.Contains(logs.String(), "STS GetCallerIdentity: attempt 6 of 15 failed") {
		t.Errorf("log lacks the 6th throttled attempt:\n%s", &logs)
	}
}

// TestNoCredentialsSaysWhereToGetThem: with no credentials anywhere, the
// default chain ends at EC2 instance metadata (here a fake with no role);
// the error lists the sources tried and how to provide one, and the SDK's
// own IMDS warnings go to the debug log, not to stderr.
func TestNoCredentialsSaysWhereToGetThem(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut { // the IMDSv2 token: refused, as on a host that allows only v1
			w.WriteHeader(http.StatusForbidden)
			return
		}
		http.NotFound(w, r) // no role
	}))
	defer imds.Close()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_EC2_METADATA_DISABLED": "", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
	} {
		t.Setenv(k, v)
	}
	var logs bytes.Buffer
	cfg, err := LoadConfig(context.Background(), Options{Region: "us-west-2", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Credentials.Retrieve(context.Background())
	var nc *NoCredentialsError
	if !errors.As(err, &nc) {
		t.Fatalf("err = %v, want a NoCredentialsError", err)
	}
	for _, want := range []string{`profile "default"`, "--profile", "AWS_PROFILE", "aws sso login --profile NAME", "AWS_ACCESS_KEY_ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "IMDS role") {
		t.Errorf("error shows the SDK's words: %v", err)
	}
	if !strings.Contains(logs.String(), "falling back to IMDSv1") {
		t.Errorf("the SDK's IMDS warning did not reach the debug log:\n%s", &logs)
	}
}
