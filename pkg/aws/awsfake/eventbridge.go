package awsfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// EventBridgeState is the EventBridge part of an account (the default bus).
type EventBridgeState struct {
	Rules []EventBridgeRule `json:"rules,omitempty"`
}

// EventBridgeRule is a rule on the default bus with its targets and tags.
type EventBridgeRule struct {
	Rule    ebtypes.Rule     `json:"rule"`
	Targets []ebtypes.Target `json:"targets,omitempty"`
	Tags    []ebtypes.Tag    `json:"tags,omitempty"`
}

// registerEventBridge adds EventBridge (awsJson1_1): rules, targets, tags.
func registerEventBridge(s *Server) {
	s.register("events", "DescribeRule", ebDescribeRule)
	s.register("events", "PutRule", ebPutRule)
	s.register("events", "DeleteRule", ebDeleteRule)
	s.register("events", "ListTargetsByRule", ebListTargetsByRule)
	s.register("events", "PutTargets", ebPutTargets)
	s.register("events", "RemoveTargets", ebRemoveTargets)
	s.register("events", "ListTagsForResource", ebListTagsForResource)
	s.register("events", "TagResource", ebTagResource)
}

func (c *call) rule(name string) (*EventBridgeRule, error) {
	for i := range c.acct.EventBridge.Rules {
		if deref(c.acct.EventBridge.Rules[i].Rule.Name) == name {
			return &c.acct.EventBridge.Rules[i], nil
		}
	}
	return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Rule %s does not exist on EventBus default.", name)
}

func ebDescribeRule(c *call) (any, error) {
	var in eventbridge.DescribeRuleInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.rule(deref(in.Name))
	if err != nil {
		return nil, err
	}
	return &eventbridge.DescribeRuleOutput{
		Name: r.Rule.Name, Arn: r.Rule.Arn, EventPattern: r.Rule.EventPattern, State: r.Rule.State,
		Description: r.Rule.Description, EventBusName: ptr("default"),
	}, nil
}

func ebPutRule(c *call) (any, error) {
	var in eventbridge.PutRuleInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	name := deref(in.Name)
	if name == "" || len(name) > 64 {
		return nil, errorf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must have length less than or equal to 64", name)
	}
	if in.EventPattern != nil && !json.Valid([]byte(*in.EventPattern)) {
		return nil, errorf(http.StatusBadRequest, "InvalidEventPatternException", "Event pattern is not valid.")
	}
	state := in.State
	if state == "" {
		state = ebtypes.RuleStateEnabled
	}
	if r, err := c.rule(name); err == nil {
		// An update: tags are ignored, as in EventBridge.
		r.Rule.EventPattern, r.Rule.State, r.Rule.Description = in.EventPattern, state, in.Description
		return &eventbridge.PutRuleOutput{RuleArn: r.Rule.Arn}, nil
	}
	arn := fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", c.acct.Region, c.acct.ID, name)
	c.acct.EventBridge.Rules = append(c.acct.EventBridge.Rules, EventBridgeRule{
		Rule: ebtypes.Rule{Name: ptr(name), Arn: ptr(arn), EventPattern: in.EventPattern, State: state, Description: in.Description, EventBusName: ptr("default")},
		Tags: in.Tags,
	})
	return &eventbridge.PutRuleOutput{RuleArn: ptr(arn)}, nil
}

func ebDeleteRule(c *call) (any, error) {
	var in eventbridge.DeleteRuleInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.rule(deref(in.Name))
	if err != nil {
		return &eventbridge.DeleteRuleOutput{}, nil // DeleteRule of a missing rule succeeds
	}
	if len(r.Targets) > 0 {
		return nil, errorf(http.StatusBadRequest, "ValidationException", "Rule can't be deleted since it has targets.")
	}
	name := deref(in.Name)
	c.acct.EventBridge.Rules = slices.DeleteFunc(c.acct.EventBridge.Rules, func(x EventBridgeRule) bool { return deref(x.Rule.Name) == name })
	return &eventbridge.DeleteRuleOutput{}, nil
}

func ebListTargetsByRule(c *call) (any, error) {
	var in eventbridge.ListTargetsByRuleInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.rule(deref(in.Rule))
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(c, r.Targets, deref(in.NextToken), in.Limit, 100, 100)
	if err != nil {
		return nil, err
	}
	return &eventbridge.ListTargetsByRuleOutput{Targets: page, NextToken: nonEmpty(next)}, nil
}

func ebPutTargets(c *call) (any, error) {
	var in eventbridge.PutTargetsInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.rule(deref(in.Rule))
	if err != nil {
		return nil, err
	}
	for _, t := range in.Targets {
		i := slices.IndexFunc(r.Targets, func(x ebtypes.Target) bool { return deref(x.Id) == deref(t.Id) })
		if i >= 0 {
			r.Targets[i] = t
		} else {
			r.Targets = append(r.Targets, t)
		}
	}
	return &eventbridge.PutTargetsOutput{}, nil
}

func ebRemoveTargets(c *call) (any, error) {
	var in eventbridge.RemoveTargetsInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.rule(deref(in.Rule))
	if err != nil {
		return nil, err
	}
	r.Targets = slices.DeleteFunc(r.Targets, func(x ebtypes.Target) bool { return slices.Contains(in.Ids, deref(x.Id)) })
	return &eventbridge.RemoveTargetsOutput{}, nil
}

func (c *call) ruleByARN(arn string) (*EventBridgeRule, error) {
	for i := range c.acct.EventBridge.Rules {
		if deref(c.acct.EventBridge.Rules[i].Rule.Arn) == arn {
			return &c.acct.EventBridge.Rules[i], nil
		}
	}
	return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Resource %s does not exist.", arn)
}

func ebListTagsForResource(c *call) (any, error) {
	var in eventbridge.ListTagsForResourceInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.ruleByARN(deref(in.ResourceARN))
	if err != nil {
		return nil, err
	}
	return &eventbridge.ListTagsForResourceOutput{Tags: slices.Clone(r.Tags)}, nil
}

func ebTagResource(c *call) (any, error) {
	var in eventbridge.TagResourceInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	r, err := c.ruleByARN(deref(in.ResourceARN))
	if err != nil {
		return nil, err
	}
	for _, t := range in.Tags {
		i := slices.IndexFunc(r.Tags, func(x ebtypes.Tag) bool { return deref(x.Key) == deref(t.Key) })
		if i >= 0 {
			r.Tags[i] = t
		} else {
			r.Tags = append(r.Tags, t)
		}
	}
	return &eventbridge.TagResourceOutput{}, nil
}
