// Package awsfake is an AWS endpoint on loopback that speaks the real wire
// protocols — ec2query (EC2), awsquery (Auto Scaling, STS, IAM), restJson1
// (EKS) and awsJson1_0/1_1 (SSM, SQS, EventBridge) — over one in-memory
// account. Real aws-sdk-go-v2 clients are pointed at it with BaseEndpoint;
// tests, the sandbox and `demo` use it in place of AWS.
//
// # Routing
//
// The service is read from the SigV4 credential scope of the Authorization
// header (…/<region>/<service>/aws4_request). Query protocols dispatch on the
// form's Action, JSON-RPC protocols on X-Amz-Target and restJson1 on method
// and path. Each service lives in its own file (ec2.go, autoscaling.go,
// eks.go, sts.go, ssm.go; iam.go, sqs.go and eventbridge.go to come) with a
// registerX(s) function listed in serviceRegistrations, and its state in a
// field of Account.
//
// # Responses and errors
//
// Handlers return aws-sdk-go-v2 output structs. XML protocols encode them by
// reflection with the element names the SDK's own deserializers match
// (zz_*_names.go, generated from the SDK by internal/gennames); JSON
// protocols use the SDK types' schema serializers. Errors carry the real AWS
// codes and statuses (ValidationError, AccessDenied, UnauthorizedOperation,
// ResourceNotFoundException, InvalidParameterValue, ...).
//
// # Faults
//
// SetFault injects, per service and action (or "*"), throttling
// (RequestLimitExceeded / Throttling / ThrottlingException), access denials
// (UnauthorizedOperation / AccessDenied / AccessDeniedException naming the
// IAM action), latency, or any Error. Calls counts requests per operation,
// which the no-N+1 benchmarks assert on.
//
// # Account description
//
// LoadAccount reads YAML or JSON. Resources use the SDK types' field names
// (matched case-insensitively, as encoding/json does); times are RFC 3339.
//
//	id: "111122223333"
//	region: us-west-2
//	autoScaling:
//	  groups:
//	  - AutoScalingGroupName: ng-general
//	    MinSize: 1
//	    MaxSize: 10
//	    DesiredCapacity: 2
//	    AvailabilityZones: [us-west-2a, us-west-2b]
//	    LaunchTemplate: {LaunchTemplateId: lt-0abc, Version: $Latest}
//	    Tags:
//	    - {Key: k8s.io/cluster-autoscaler/enabled, Value: "true"}
//	    Instances:
//	    - {InstanceId: i-0001, InstanceType: m5.large, AvailabilityZone: us-west-2a, LifecycleState: InService}
//	ec2:
//	  launchTemplateVersions:
//	  - LaunchTemplateId: lt-0abc
//	    LaunchTemplateName: general
//	    VersionNumber: 1
//	    DefaultVersion: true
//	    LaunchTemplateData: {ImageId: ami-0123, InstanceType: m5.large}
//	  subnets: [{SubnetId: subnet-a, AvailabilityZone: us-west-2a, VpcId: vpc-1}]
//	eks:
//	  clusters:
//	  - cluster: {Name: prod, Version: "1.31", Status: ACTIVE}
//	    nodegroups: [{NodegroupName: mng-a, ClusterName: prod, Status: ACTIVE}]
//	ssm:
//	  parameters:
//	  - {Name: /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id, Value: ami-0123}
//
// Instances of an ASG need no EC2 twin: one is created for each.
package awsfake

//go:generate go run ./internal/gennames -module github.com/aws/aws-sdk-go-v2/service/ec2 -var ec2Names -member item -out zz_ec2_names.go
//go:generate go run ./internal/gennames -module github.com/aws/aws-sdk-go-v2/service/autoscaling -var autoscalingNames -out zz_autoscaling_names.go
//go:generate go run ./internal/gennames -module github.com/aws/aws-sdk-go-v2/service/sts -var stsNames -out zz_sts_names.go
