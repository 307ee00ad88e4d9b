package iam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

// queueRes is the interruption queue.
type queueRes struct {
	name, arn string
	policy    desired.PolicyDocument
}

const queueRetention = "300"

func (x *queueRes) ref() Ref     { return Ref{Kind: KindQueue, Name: x.name, ARN: x.arn} }
func (x *queueRes) group() Group { return GroupInterruption }
func (x *queueRes) attributes() map[string]string {
	return map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): queueRetention,
		string(sqstypes.QueueAttributeNameSqsManagedSseEnabled):   "true",
		string(sqstypes.QueueAttributeNamePolicy):                 x.policy.JSON(),
	}
}
func (x *queueRes) document() any {
	return map[string]any{"messageRetentionPeriod": 300, "sqsManagedSseEnabled": true, "policy": x.policy}
}

func (x *queueRes) url(ctx context.Context, r *runner) (string, error) {
	var out *sqs.GetQueueUrlOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(x.name)})
		return err
	})
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", wrap("get URL of", x.ref(), err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func (x *queueRes) tags(ctx context.Context, r *runner, url string) (map[string]string, error) {
	var out *sqs.ListQueueTagsOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
		return err
	})
	if err != nil {
		return nil, wrap("list tags of", x.ref(), err)
	}
	return out.Tags, nil
}

func (x *queueRes) observe(ctx context.Context, r *runner) (observed, error) {
	url, err := x.url(ctx, r)
	if err != nil || url == "" {
		return observed{}, err
	}
	tags, err := x.tags(ctx, r, url)
	if err != nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tags)}
	var out *sqs.GetQueueAttributesOutput
	err = r.call(ctx, func() (err error) {
		out, err = r.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		return err
	})
	if err != nil {
		return o, wrap("get attributes of", x.ref(), err)
	}
	a := out.Attributes
	if v := a[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)]; v != queueRetention {
		o.diff = append(o.diff, fmt.Sprintf("MessageRetentionPeriod: current %q, desired %q", v, queueRetention))
	}
	if v := a[string(sqstypes.QueueAttributeNameSqsManagedSseEnabled)]; v != "true" {
		o.diff = append(o.diff, fmt.Sprintf("SqsManagedSseEnabled: current %q, desired \"true\"", v))
	}
	raw := a[string(sqstypes.QueueAttributeNamePolicy)]
	if raw == "" {
		o.diff = append(o.diff, "Policy: none, desired the interruption queue policy")
	} else if cur, err := desired.ParsePolicy(raw); err != nil {
		o.diff = append(o.diff, "Policy: unreadable: "+err.Error())
	} else {
		o.diff = append(o.diff, policyDiff("queue policy", cur, x.policy)...)
	}
	return o, nil
}

func (x *queueRes) create(ctx context.Context, r *runner) error {
	return wrap("create", x.ref(), r.call(ctx, func() error {
		_, err := r.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(x.name), Attributes: x.attributes(), Tags: r.d.Tags()})
		return err
	}))
}

func (x *queueRes) update(ctx context.Context, r *runner) error {
	url, err := x.url(ctx, r)
	if err != nil {
		return err
	}
	if url == "" {
		return fmt.Errorf("update %s: it no longer exists; run plan again", x.ref())
	}
	return wrap("set attributes of", x.ref(), r.call(ctx, func() error {
		_, err := r.c.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: x.attributes()})
		return err
	}))
}

func (x *queueRes) adopt(ctx context.Context, r *runner) error {
	url, err := x.url(ctx, r)
	if err != nil {
		return err
	}
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: r.d.Tags()})
		return err
	}))
}

func (x *queueRes) remove(ctx context.Context, r *runner) (bool, error) {
	url, err := x.url(ctx, r)
	if err != nil || url == "" {
		return false, err
	}
	tags, err := x.tags(ctx, r, url)
	if err != nil || !r.ours(tags) {
		return false, err
	}
	err = r.call(ctx, func() error {
		_, err := r.c.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}

// ruleRes is an EventBridge rule targeting the queue.
type ruleRes struct {
	name, arn, pattern, queueARN string
}

// QueueTargetID is the id of the queue target on every rule.
const QueueTargetID = "KarpenterInterruptionQueueTarget"

func (x *ruleRes) ref() Ref     { return Ref{Kind: KindRule, Name: x.name, ARN: x.arn} }
func (x *ruleRes) group() Group { return GroupInterruption }
func (x *ruleRes) document() any {
	return map[string]any{"eventPattern": x.pattern, "state": "ENABLED", "target": x.queueARN}
}

func (x *ruleRes) get(ctx context.Context, r *runner) (*eventbridge.DescribeRuleOutput, error) {
	var out *eventbridge.DescribeRuleOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.EventBridge.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(x.name)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	return out, wrap("describe", x.ref(), err)
}

func (x *ruleRes) tagsOf(ctx context.Context, r *runner, arn string) (map[string]string, error) {
	var out *eventbridge.ListTagsForResourceOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.EventBridge.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String(arn)})
		return err
	})
	if err != nil {
		return nil, wrap("list tags of", x.ref(), err)
	}
	m := map[string]string{}
	for _, t := range out.Tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m, nil
}

func (x *ruleRes) targets(ctx context.Context, r *runner) ([]ebtypes.Target, error) {
	var all []ebtypes.Target
	in := &eventbridge.ListTargetsByRuleInput{Rule: aws.String(x.name)}
	for {
		var out *eventbridge.ListTargetsByRuleOutput
		err := r.call(ctx, func() (err error) {
			out, err = r.c.EventBridge.ListTargetsByRule(ctx, in)
			return err
		})
		if err != nil {
			return nil, wrap("list targets of", x.ref(), err)
		}
		all = append(all, out.Targets...)
		if aws.ToString(out.NextToken) == "" {
			return all, nil
		}
		in.NextToken = out.NextToken
	}
}

func (x *ruleRes) observe(ctx context.Context, r *runner) (observed, error) {
	rule, err := x.get(ctx, r)
	if err != nil || rule == nil {
		return observed{}, err
	}
	tags, err := x.tagsOf(ctx, r, aws.ToString(rule.Arn))
	if err != nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(tags)}
	want, _ := desired.CanonicalJSON(x.pattern)
	have, err := desired.CanonicalJSON(aws.ToString(rule.EventPattern))
	if err != nil || have != want {
		o.diff = append(o.diff, fmt.Sprintf("event pattern: current %s, desired %s", aws.ToString(rule.EventPattern), x.pattern))
	}
	if rule.State != ebtypes.RuleStateEnabled {
		o.diff = append(o.diff, fmt.Sprintf("state: current %s, desired ENABLED", rule.State))
	}
	ts, err := x.targets(ctx, r)
	if err != nil {
		return o, err
	}
	if !slices.ContainsFunc(ts, func(t ebtypes.Target) bool { return aws.ToString(t.Arn) == x.queueARN }) {
		o.diff = append(o.diff, "no target for the queue "+x.queueARN)
	}
	return o, nil
}

func (x *ruleRes) put(ctx context.Context, r *runner, tags bool) error {
	in := &eventbridge.PutRuleInput{
		Name: aws.String(x.name), EventPattern: aws.String(x.pattern), State: ebtypes.RuleStateEnabled,
		Description: aws.String("Karpenter interruption events for cluster " + r.d.Target.Cluster + ", created by karpenter-migrate"),
	}
	if tags {
		for _, k := range sortedKeys(r.d.Tags()) {
			in.Tags = append(in.Tags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(r.d.Tags()[k])})
		}
	}
	err := r.call(ctx, func() error {
		_, err := r.c.EventBridge.PutRule(ctx, in)
		return err
	})
	if err != nil {
		return wrap("put", x.ref(), err)
	}
	var out *eventbridge.PutTargetsOutput
	err = r.callFresh(ctx, func() (err error) {
		out, err = r.c.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{
			Rule: aws.String(x.name), Targets: []ebtypes.Target{{Id: aws.String(QueueTargetID), Arn: aws.String(x.queueARN)}},
		})
		return err
	})
	if err == nil && out.FailedEntryCount > 0 && len(out.FailedEntries) > 0 {
		f := out.FailedEntries[0]
		err = fmt.Errorf("%s: %s", aws.ToString(f.ErrorCode), aws.ToString(f.ErrorMessage))
	}
	return wrap("target the queue from", x.ref(), err)
}

func (x *ruleRes) create(ctx context.Context, r *runner) error { return x.put(ctx, r, true) }
func (x *ruleRes) update(ctx context.Context, r *runner) error { return x.put(ctx, r, false) }

func (x *ruleRes) adopt(ctx context.Context, r *runner) error {
	rule, err := x.get(ctx, r)
	if err != nil || rule == nil {
		return errors.Join(err, fmt.Errorf("adopt %s: it no longer exists", x.ref()))
	}
	var tags []ebtypes.Tag
	for _, k := range sortedKeys(r.d.Tags()) {
		tags = append(tags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(r.d.Tags()[k])})
	}
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.EventBridge.TagResource(ctx, &eventbridge.TagResourceInput{ResourceARN: rule.Arn, Tags: tags})
		return err
	}))
}

func (x *ruleRes) remove(ctx context.Context, r *runner) (bool, error) {
	rule, err := x.get(ctx, r)
	if err != nil || rule == nil {
		return false, err
	}
	tags, err := x.tagsOf(ctx, r, aws.ToString(rule.Arn))
	if err != nil || !r.ours(tags) {
		return false, err
	}
	ts, err := x.targets(ctx, r)
	if err != nil {
		return false, err
	}
	if len(ts) > 0 {
		ids := make([]string, 0, len(ts))
		for _, t := range ts {
			ids = append(ids, aws.ToString(t.Id))
		}
		err := r.call(ctx, func() error {
			_, err := r.c.EventBridge.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(x.name), Ids: ids})
			return err
		})
		if err != nil {
			return false, wrap("remove targets of", x.ref(), err)
		}
	}
	err = r.call(ctx, func() error {
		_, err := r.c.EventBridge.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(x.name)})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}

// podIdentityRes is the pod identity association of the controller's
// service account.
type podIdentityRes struct {
	cluster, namespace, serviceAccount, roleARN string
}

func (x *podIdentityRes) ref() Ref {
	return Ref{Kind: KindPodIdentity, Name: x.namespace + "/" + x.serviceAccount}
}
func (x *podIdentityRes) group() Group { return GroupControllerRole }
func (x *podIdentityRes) document() any {
	return map[string]any{"namespace": x.namespace, "serviceAccount": x.serviceAccount, "roleArn": x.roleARN}
}

func (x *podIdentityRes) get(ctx context.Context, r *runner) (*eks.DescribePodIdentityAssociationOutput, error) {
	var list *eks.ListPodIdentityAssociationsOutput
	err := r.call(ctx, func() (err error) {
		list, err = r.c.EKS.ListPodIdentityAssociations(ctx, &eks.ListPodIdentityAssociationsInput{
			ClusterName: aws.String(x.cluster), Namespace: aws.String(x.namespace), ServiceAccount: aws.String(x.serviceAccount),
		})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("list", x.ref(), err)
	}
	if len(list.Associations) == 0 {
		return nil, nil
	}
	var out *eks.DescribePodIdentityAssociationOutput
	err = r.call(ctx, func() (err error) {
		out, err = r.c.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{
			ClusterName: aws.String(x.cluster), AssociationId: list.Associations[0].AssociationId,
		})
		return err
	})
	return out, wrap("describe", x.ref(), err)
}

func (x *podIdentityRes) observe(ctx context.Context, r *runner) (observed, error) {
	a, err := x.get(ctx, r)
	if err != nil || a == nil || a.Association == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(a.Association.Tags)}
	if have := aws.ToString(a.Association.RoleArn); have != x.roleARN {
		o.diff = append(o.diff, fmt.Sprintf("roleArn: current %s, desired %s", have, x.roleARN))
	}
	return o, nil
}

func (x *podIdentityRes) create(ctx context.Context, r *runner) error {
	// The role was probably created a moment ago: EKS may not see it yet.
	return wrap("create", x.ref(), r.callFresh(ctx, func() error {
		_, err := r.c.EKS.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{
			ClusterName: aws.String(x.cluster), Namespace: aws.String(x.namespace), ServiceAccount: aws.String(x.serviceAccount),
			RoleArn: aws.String(x.roleARN), Tags: r.d.Tags(),
		})
		return err
	}))
}

func (x *podIdentityRes) update(ctx context.Context, r *runner) error {
	a, err := x.get(ctx, r)
	if err != nil || a == nil || a.Association == nil {
		return errors.Join(err, fmt.Errorf("update %s: it no longer exists; run plan again", x.ref()))
	}
	return wrap("update", x.ref(), r.callFresh(ctx, func() error {
		_, err := r.c.EKS.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{
			ClusterName: aws.String(x.cluster), AssociationId: a.Association.AssociationId, RoleArn: aws.String(x.roleARN),
		})
		return err
	}))
}

func (x *podIdentityRes) adopt(ctx context.Context, r *runner) error {
	a, err := x.get(ctx, r)
	if err != nil || a == nil || a.Association == nil {
		return errors.Join(err, fmt.Errorf("adopt %s: it no longer exists", x.ref()))
	}
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: a.Association.AssociationArn, Tags: r.d.Tags()})
		return err
	}))
}

func (x *podIdentityRes) remove(ctx context.Context, r *runner) (bool, error) {
	a, err := x.get(ctx, r)
	if err != nil || a == nil || a.Association == nil || !r.ours(a.Association.Tags) {
		return false, err
	}
	err = r.call(ctx, func() error {
		_, err := r.c.EKS.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String(x.cluster), AssociationId: a.Association.AssociationId})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}

// accessEntryRes is the EKS access entry for the node role.
type accessEntryRes struct {
	cluster, principal, typ string
}

func (x *accessEntryRes) ref() Ref {
	return Ref{Kind: KindAccessEntry, Name: x.principal}
}
func (x *accessEntryRes) group() Group { return GroupNodeAccess }
func (x *accessEntryRes) document() any {
	return map[string]any{"principalArn": x.principal, "type": x.typ}
}

func (x *accessEntryRes) get(ctx context.Context, r *runner) (*eks.DescribeAccessEntryOutput, error) {
	var out *eks.DescribeAccessEntryOutput
	err := r.call(ctx, func() (err error) {
		out, err = r.c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(x.cluster), PrincipalArn: aws.String(x.principal)})
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	return out, wrap("describe", x.ref(), err)
}

func (x *accessEntryRes) observe(ctx context.Context, r *runner) (observed, error) {
	e, err := x.get(ctx, r)
	if err != nil || e == nil || e.AccessEntry == nil {
		return observed{}, err
	}
	o := observed{exists: true, ours: r.ours(e.AccessEntry.Tags)}
	if have := aws.ToString(e.AccessEntry.Type); have != x.typ {
		o.diff = append(o.diff, fmt.Sprintf("type: current %s, desired %s (the type cannot change: delete the entry by hand)", have, x.typ))
	}
	return o, nil
}

func (x *accessEntryRes) create(ctx context.Context, r *runner) error {
	return wrap("create", x.ref(), r.callFresh(ctx, func() error {
		_, err := r.c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{
			ClusterName: aws.String(x.cluster), PrincipalArn: aws.String(x.principal), Type: aws.String(x.typ), Tags: r.d.Tags(),
		})
		return err
	}))
}

func (x *accessEntryRes) update(context.Context, *runner) error {
	return fmt.Errorf("update %s: an access entry's type cannot change; delete it and apply again", x.ref())
}

func (x *accessEntryRes) adopt(ctx context.Context, r *runner) error {
	e, err := x.get(ctx, r)
	if err != nil || e == nil || e.AccessEntry == nil {
		return errors.Join(err, fmt.Errorf("adopt %s: it no longer exists", x.ref()))
	}
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: e.AccessEntry.AccessEntryArn, Tags: r.d.Tags()})
		return err
	}))
}

func (x *accessEntryRes) remove(ctx context.Context, r *runner) (bool, error) {
	e, err := x.get(ctx, r)
	if err != nil || e == nil || e.AccessEntry == nil || !r.ours(e.AccessEntry.Tags) {
		return false, err
	}
	err = r.call(ctx, func() error {
		_, err := r.c.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(x.cluster), PrincipalArn: aws.String(x.principal)})
		if notFound(err) {
			return nil
		}
		return err
	})
	return err == nil, wrap("delete", x.ref(), err)
}

// discoveryTagRes is karpenter.sh/discovery=<cluster> on one subnet or
// security group.
type discoveryTagRes struct {
	id, cluster string
}

func (x *discoveryTagRes) ref() Ref     { return Ref{Kind: KindDiscoveryTag, Name: x.id} }
func (x *discoveryTagRes) group() Group { return GroupDiscoveryTags }
func (x *discoveryTagRes) document() any {
	return map[string]string{desired.TagDiscovery: x.cluster}
}

func (x *discoveryTagRes) tags(ctx context.Context, r *runner) (map[string]string, error) {
	var tags []ec2types.Tag
	err := r.call(ctx, func() error {
		if strings.HasPrefix(x.id, "sg-") {
			out, err := r.c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{x.id}})
			if err == nil && len(out.SecurityGroups) == 1 {
				tags = out.SecurityGroups[0].Tags
			} else if err == nil {
				err = fmt.Errorf("security group %s not found", x.id)
			}
			return err
		}
		out, err := r.c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{x.id}})
		if err == nil && len(out.Subnets) == 1 {
			tags = out.Subnets[0].Tags
		} else if err == nil {
			err = fmt.Errorf("subnet %s not found", x.id)
		}
		return err
	})
	if err != nil {
		return nil, wrap("describe", x.ref(), err)
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m, nil
}

func (x *discoveryTagRes) observe(ctx context.Context, r *runner) (observed, error) {
	tags, err := x.tags(ctx, r)
	if err != nil {
		return observed{}, err
	}
	v, ok := tags[desired.TagDiscovery]
	if !ok {
		return observed{}, nil
	}
	o := observed{exists: true, ours: tags[desired.TagDiscoveryAdded] == x.cluster}
	if v != x.cluster {
		o.diff = append(o.diff, fmt.Sprintf("%s=%s already names another cluster; a resource can carry one discovery tag, so select it by id in the EC2NodeClass instead", desired.TagDiscovery, v))
		return o, nil
	}
	if !o.ours {
		o.foreignOK = true
		o.note = "already tagged"
	}
	return o, nil
}

func (x *discoveryTagRes) create(ctx context.Context, r *runner) error {
	return wrap("tag", x.ref(), r.call(ctx, func() error {
		_, err := r.c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{x.id}, Tags: []ec2types.Tag{
			{Key: aws.String(desired.TagDiscovery), Value: aws.String(x.cluster)},
			{Key: aws.String(desired.TagDiscoveryAdded), Value: aws.String(x.cluster)},
		}})
		return err
	}))
}

func (x *discoveryTagRes) update(ctx context.Context, r *runner) error { return x.create(ctx, r) }
func (x *discoveryTagRes) adopt(context.Context, *runner) error        { return nil }

func (x *discoveryTagRes) remove(ctx context.Context, r *runner) (bool, error) {
	tags, err := x.tags(ctx, r)
	if err != nil || tags[desired.TagDiscoveryAdded] != x.cluster {
		return false, err
	}
	del := []ec2types.Tag{{Key: aws.String(desired.TagDiscoveryAdded)}}
	if tags[desired.TagDiscovery] == x.cluster {
		del = append(del, ec2types.Tag{Key: aws.String(desired.TagDiscovery), Value: aws.String(x.cluster)})
	}
	err = r.call(ctx, func() error {
		_, err := r.c.EC2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{x.id}, Tags: del})
		return err
	})
	return err == nil, wrap("remove discovery tag from", x.ref(), err)
}

// awsAuthRes is the node role's mapRoles entry in aws-auth.
type awsAuthRes struct {
	entry awsauth.MapRole
}

func (x *awsAuthRes) ref() Ref      { return Ref{Kind: KindAWSAuth, Name: x.entry.RoleARN} }
func (x *awsAuthRes) group() Group  { return GroupNodeAccess }
func (x *awsAuthRes) document() any { return x.entry }

func (x *awsAuthRes) api(r *runner) (AWSAuthAPI, error) {
	if r.c.AWSAuth == nil {
		return nil, errors.New("the cluster uses aws-auth (authentication mode CONFIG_MAP) but no Kubernetes access was configured; pass --kubeconfig/--context")
	}
	return r.c.AWSAuth, nil
}

func (x *awsAuthRes) observe(ctx context.Context, r *runner) (observed, error) {
	api, err := x.api(r)
	if err != nil {
		return observed{}, err
	}
	st, err := api.Lookup(ctx, x.entry)
	if err != nil || !st.Present {
		return observed{}, wrap("read", x.ref(), err)
	}
	o := observed{exists: true, ours: st.Ours, diff: st.Diff}
	if !st.Ours && st.Matches {
		o.foreignOK = true
		o.note = "already mapped"
	}
	return o, nil
}

func (x *awsAuthRes) create(ctx context.Context, r *runner) error {
	api, err := x.api(r)
	if err != nil {
		return err
	}
	return wrap("add", x.ref(), api.Ensure(ctx, x.entry))
}

func (x *awsAuthRes) update(ctx context.Context, r *runner) error {
	return fmt.Errorf("update %s: the entry was changed after karpenter-migrate wrote it; fix it in aws-auth by hand (%s)", x.ref(), strings.Join(x.entry.Groups, ","))
}

func (x *awsAuthRes) adopt(context.Context, *runner) error { return nil }

func (x *awsAuthRes) remove(ctx context.Context, r *runner) (bool, error) {
	api, err := x.api(r)
	if err != nil {
		return false, err
	}
	ok, err := api.Remove(ctx, x.entry)
	return ok, wrap("remove", x.ref(), err)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
