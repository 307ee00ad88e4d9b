package aws

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

func testConfig(t *testing.T, url string) awssdk.Config {
	t.Helper()
	cfg, err := LoadConfig(context.Background(), Options{
		Region: "us-west-2", EndpointURL: url, MaxAttempts: 2, MaxBackoff: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNonAWSAnswerIsExplained: an endpoint that answers an operation with
// an HTML page (moto_server for EKS access entries, a proxy, a wrong
// --endpoint-url) gets an error naming the operation and the endpoint; an
// AWS error is left as it is.
func TestNonAWSAnswerIsExplained(t *testing.T) {
	const page = "<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/clusters/prod/access-entries/"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(page))
		case strings.HasPrefix(r.URL.Path, "/clusters/"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"No cluster found for name: gone."}`))
		default: // Auto Scaling (awsquery): an HTML 500
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<!doctype html><title>500 Internal Server Error</title>"))
		}
	}))
	defer srv.Close()
	cfg := testConfig(t, srv.URL)
	ctx := context.Background()

	_, err := eks.NewFromConfig(cfg).DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: awssdk.String("prod"), PrincipalArn: awssdk.String("arn:aws:iam::111122223333:role/n")})
	var nae *NotAWSError
	if !errors.As(err, &nae) || nae.StatusCode != http.StatusNotFound {
		t.Fatalf("DescribeAccessEntry = %v, want a NotAWSError for HTTP 404", err)
	}
	for _, want := range []string{"DescribeAccessEntry", srv.URL, "HTTP 404", "does not serve this API"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}

	_, err = autoscaling.NewFromConfig(cfg).TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: awssdk.String("i-0"), ShouldDecrementDesiredCapacity: awssdk.Bool(true)})
	if !errors.As(err, &nae) || nae.StatusCode != http.StatusInternalServerError || !strings.Contains(err.Error(), "TerminateInstanceInAutoScalingGroup") {
		t.Errorf("TerminateInstanceInAutoScalingGroup = %v, want a NotAWSError for HTTP 500 naming the operation", err)
	}

	_, err = eks.NewFromConfig(cfg).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String("gone")})
	if errors.As(err, &nae) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("DescribeCluster = %v, want the AWS error untouched", err)
	}
}
