package awsfake

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// registerSSM adds SSM (awsJson1_1): the public parameters AMI lookups read,
// such as /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id.
func registerSSM(s *Server) {
	s.register("ssm", "GetParameter", ssmGetParameter)
}

func ssmGetParameter(c *call) (any, error) {
	var in ssm.GetParameterInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	name := deref(in.Name)
	if name == "" {
		return nil, validationError("1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	for _, p := range c.acct.SSM.Parameters {
		if deref(p.Name) == name {
			p := p
			return &ssm.GetParameterOutput{Parameter: &p}, nil
		}
	}
	return nil, errorf(http.StatusBadRequest, "ParameterNotFound", "Parameter %s not found.", name)
}
