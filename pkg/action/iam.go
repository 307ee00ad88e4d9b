package action

import (
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

// IAMClients are pkg/iam's collaborators: SDK clients over the AWS config
// and, when the desired state maps nodes through aws-auth and Kubernetes
// is reachable, the aws-auth editor (backed up to Namespace and OutDir
// before it writes). It is the one place IAM clients are built.
func (c *Configuration) IAMClients(d *iam.Desired) iam.Clients {
	cl := iam.Clients{
		IAM: awsiam.NewFromConfig(c.AWS), SQS: sqs.NewFromConfig(c.AWS), EventBridge: eventbridge.NewFromConfig(c.AWS),
		EKS: eks.NewFromConfig(c.AWS), EC2: ec2.NewFromConfig(c.AWS),
	}
	if c.Kube != nil && (d == nil || d.NodeAccess == iam.NodeAccessConfigMap) {
		cl.AWSAuth = &awsauth.Editor{Client: c.Kube, BackupNamespace: c.Namespace, BackupDir: c.OutDir, Now: c.now}
	}
	return cl
}
