package awsfake

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// registerSTS adds STS (awsquery). AssumeRole and friends belong with IAM.
func registerSTS(s *Server) {
	s.register("sts", "GetCallerIdentity", stsGetCallerIdentity)
}

func stsGetCallerIdentity(c *call) (any, error) {
	arn := c.acct.CallerARN
	user := arn[strings.LastIndex(arn, "/")+1:]
	return &sts.GetCallerIdentityOutput{Account: &c.acct.ID, Arn: &arn, UserId: ptr("AIDAAWSFAKE" + strings.ToUpper(user))}, nil
}
