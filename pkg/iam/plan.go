// Package iam brings one cluster's account to the desired IAM state
// (pkg/iam/desired): it diffs that state against what exists, applies only
// the difference, tagging everything it creates, and keeps a journal so
// that Down removes exactly what it created.
package iam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube/awsauth"
)

// Action is what Apply (or Down) does to one object.
type Action string

// Actions.
const (
	ActionCreate Action = "create"
	ActionUpdate Action = "update"
	ActionNoop   Action = "no-op"
	// ActionAdopt tags an existing, matching object as ours (--adopt).
	ActionAdopt Action = "adopt"
	// ActionConflict: the object exists, is not ours, and differs or was
	// not adopted. The plan stops.
	ActionConflict Action = "conflict"
	// ActionMissing: a prerequisite we were not asked to create is missing.
	ActionMissing Action = "missing"
	// ActionDelete and ActionKeep are Down's: delete ours, keep the rest.
	ActionDelete Action = "delete"
	ActionKeep   Action = "keep"
	ActionAbsent Action = "absent"
)

// PastTense says what an applied action did ("created"), for progress lines.
func (a Action) PastTense() string {
	switch a {
	case ActionCreate:
		return "created"
	case ActionUpdate:
		return "updated"
	case ActionAdopt:
		return "adopted"
	}
	return string(a)
}

// Item is one object in a plan.
type Item struct {
	Ref
	Group    Group    `json:"group"`
	Action   Action   `json:"action"`
	Reason   string   `json:"reason,omitempty"`
	Diff     []string `json:"diff,omitempty"`
	Document any      `json:"document,omitempty"`

	res resource
}

// Plan is the list of objects and what to do to each, in apply order.
type Plan struct {
	Cluster          string           `json:"cluster"`
	KarpenterVersion string           `json:"karpenterVersion"`
	Identity         desired.Identity `json:"identity"`
	NodeAccess       string           `json:"nodeAccess"`
	Items            []Item           `json:"items"`

	desired *desired.State
}

// Blocked returns the items that stop the plan (conflicts, missing
// prerequisites).
func (p *Plan) Blocked() []Item {
	var out []Item
	for _, it := range p.Items {
		if it.Action == ActionConflict || it.Action == ActionMissing {
			out = append(out, it)
		}
	}
	return out
}

// Changes counts the items Apply would act on.
func (p *Plan) Changes() int {
	n := 0
	for _, it := range p.Items {
		switch it.Action {
		case ActionCreate, ActionUpdate, ActionAdopt, ActionDelete:
			n++
		}
	}
	return n
}

// BlockedError explains why a plan cannot be applied.
type BlockedError struct{ Items []Item }

func (e *BlockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) block the plan:", len(e.Items))
	for _, it := range e.Items {
		fmt.Fprintf(&b, "\n  %s: %s", it.Ref, it.Reason)
	}
	return b.String()
}

// resources lists the desired objects in creation order.
func resources(d *desired.State) []resource {
	var out []resource
	for _, id := range d.Target.SubnetIDs {
		out = append(out, &discoveryTagRes{id: id, cluster: d.Target.Cluster})
	}
	for _, id := range d.Target.SecurityGroupIDs {
		out = append(out, &discoveryTagRes{id: id, cluster: d.Target.Cluster})
	}
	out = append(out, &roleRes{kind: KindNodeRole, grp: GroupNodeRole, name: d.NodeRole, arn: d.NodeRoleARN, trust: d.NodeTrust, policies: d.NodeManagedPolicy})
	if d.InstanceProfile != "" {
		out = append(out, &profileRes{name: d.InstanceProfile, role: d.NodeRole,
			arn: fmt.Sprintf("arn:%s:iam::%s:instance-profile/%s", d.Target.Partition, d.Target.AccountID, d.InstanceProfile)})
	}
	if d.Identity == desired.IdentityIRSA {
		out = append(out, &oidcRes{arn: d.OIDCProviderARN, url: d.OIDCProviderURL, managed: d.CreateOIDCProvider})
	}
	var policyARNs []string
	for _, p := range d.ControllerPolicies {
		arn := d.PolicyARN(p.Name)
		policyARNs = append(policyARNs, arn)
		out = append(out, &policyRes{name: p.Name, arn: arn, doc: p.Document})
	}
	out = append(out, &roleRes{kind: KindControllerRole, grp: GroupControllerRole, name: d.ControllerRole, arn: d.ControllerRoleARN, trust: d.ControllerTrust, policies: policyARNs})
	if d.Identity == desired.IdentityPodIdentity {
		out = append(out, &podIdentityRes{cluster: d.Target.Cluster, namespace: d.Namespace, serviceAccount: d.ServiceAccount, roleARN: d.ControllerRoleARN})
	}
	out = append(out, &queueRes{name: d.Queue, arn: d.QueueARN, policy: d.QueuePolicy})
	for _, rule := range d.Rules {
		out = append(out, &ruleRes{name: rule.Name, pattern: rule.EventPattern, queueARN: d.QueueARN,
			arn: fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", d.Target.Partition, d.Target.Region, d.Target.AccountID, rule.Name)})
	}
	switch d.NodeAccess {
	case desired.NodeAccessAccessEntry:
		out = append(out, &accessEntryRes{cluster: d.Target.Cluster, principal: d.NodeRoleARN, typ: d.AccessEntryType})
	case desired.NodeAccessConfigMap:
		out = append(out, &awsAuthRes{entry: awsauth.MapRole{RoleARN: d.NodeRoleARN, Username: "system:node:{{EC2PrivateDNSName}}", Groups: d.AWSAuthGroups}})
	}
	return out
}

// PlanOptions tune BuildPlan.
type PlanOptions struct {
	// Only restricts the plan to these runbook groups (all when empty).
	Only    []Group
	Backoff Backoff
}

// BuildPlan reads the current state of every desired object and decides
// what to do to it. It changes nothing.
func BuildPlan(ctx context.Context, d *desired.State, c Clients, o PlanOptions) (*Plan, error) {
	r := &runner{c: c, d: d, backoff: o.Backoff}
	p := &Plan{Cluster: d.Target.Cluster, KarpenterVersion: d.KarpenterVersion, Identity: d.Identity, NodeAccess: d.NodeAccess, desired: d}
	for _, res := range resources(d) {
		if len(o.Only) > 0 && !slices.Contains(o.Only, res.group()) {
			continue
		}
		obs, err := res.observe(ctx, r)
		if err != nil {
			return nil, err
		}
		it := Item{Ref: res.ref(), Group: res.group(), Document: res.document(), res: res}
		it.Action, it.Reason = decide(res, obs, d.Adopt)
		it.Diff = obs.diff
		p.Items = append(p.Items, it)
	}
	return p, nil
}

func decide(res resource, o observed, adopt bool) (Action, string) {
	if oidc, ok := res.(*oidcRes); ok && !o.exists && !oidc.managed {
		return ActionMissing, "the cluster's IAM OIDC provider does not exist and IRSA needs it; rerun with --create-oidc-provider, or use --identity pod-identity"
	}
	switch {
	case !o.exists:
		return ActionCreate, ""
	case o.ours && len(o.diff) == 0:
		return ActionNoop, "up to date"
	case o.ours:
		return ActionUpdate, "differs from the desired state"
	case o.foreignOK:
		return ActionNoop, o.note
	case len(o.diff) > 0:
		return ActionConflict, "exists, was not created by karpenter-migrate, and differs; change or delete it by hand"
	case adopt:
		return ActionAdopt, "exists and matches; --adopt tags it as managed by karpenter-migrate"
	}
	return ActionConflict, "exists and matches but was not created by karpenter-migrate; rerun with --adopt to manage it"
}

// Journal records what Apply changed so that a re-run or Down can finish
// the job after a failure part-way. It is plain JSON.
type Journal struct {
	Cluster string         `json:"cluster"`
	Entries []JournalEntry `json:"entries"`
}

// JournalEntry is one completed step.
type JournalEntry struct {
	Ref
	Action Action    `json:"action"`
	At     time.Time `json:"at"`
}

// ApplyOptions tune Apply.
type ApplyOptions struct {
	Backoff Backoff
	// Journal, when set, is appended to; otherwise Apply starts a new one.
	Journal *Journal
	// Save is called after every completed step with the journal so far
	// (write it to disk); an error stops Apply.
	Save func(*Journal) error
	// OnStep reports progress.
	OnStep func(Item)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Apply does what the plan says and nothing else, in order. A plan with
// conflicts or missing prerequisites is refused. The journal is returned
// also on error.
func Apply(ctx context.Context, p *Plan, c Clients, o ApplyOptions) (*Journal, error) {
	j := o.Journal
	if j == nil {
		j = &Journal{Cluster: p.Cluster}
	}
	if b := p.Blocked(); len(b) > 0 {
		return j, &BlockedError{Items: b}
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	r := &runner{c: c, d: p.desired, backoff: o.Backoff}
	for _, it := range p.Items {
		if it.res == nil {
			return j, fmt.Errorf("%s: the plan was not built by BuildPlan (read from a file?); plan again", it.Ref)
		}
		var err error
		switch it.Action {
		case ActionNoop:
			continue
		case ActionCreate:
			err = it.res.create(ctx, r)
			if alreadyExists(err) {
				err = recoverCreate(ctx, r, it.res, err)
			}
		case ActionUpdate:
			err = it.res.update(ctx, r)
		case ActionAdopt:
			err = it.res.adopt(ctx, r)
		default:
			err = fmt.Errorf("%s: action %q cannot be applied", it.Ref, it.Action)
		}
		if err != nil {
			return j, err
		}
		j.Entries = append(j.Entries, JournalEntry{Ref: it.Ref, Action: it.Action, At: now().UTC()})
		if o.Save != nil {
			if err := o.Save(j); err != nil {
				return j, fmt.Errorf("save journal after %s: %w", it.Ref, err)
			}
		}
		if o.OnStep != nil {
			o.OnStep(it)
		}
	}
	return j, nil
}

// recoverCreate handles "already exists" on create: a retried request whose
// first attempt succeeded, or a re-run after a response was lost. The object
// is used if it is ours, brought up to date if it differs; anything else is
// a conflict that appeared after the plan was made.
func recoverCreate(ctx context.Context, r *runner, res resource, createErr error) error {
	o, err := res.observe(ctx, r)
	if err != nil {
		return errors.Join(createErr, err)
	}
	switch {
	case o.exists && o.ours && len(o.diff) == 0:
		return nil
	case o.exists && o.ours:
		return res.update(ctx, r)
	}
	return fmt.Errorf("%s appeared after the plan was made and was not created by karpenter-migrate; run plan again: %w", res.ref(), createErr)
}

// DownOptions tune Down.
type DownOptions struct {
	Backoff Backoff
	// Only restricts Down to the objects of these runbook groups (all when
	// empty).
	Only []Group
	// DryRun only reports what would be deleted.
	DryRun bool
	// OnStep reports progress.
	OnStep func(Item)
}

// Down deletes, in dependency order, every object that this tool created
// for the cluster: the desired objects for every Karpenter version and
// identity (a version change leaves old policies behind) and every object
// in the journal. Node access and the pod identity association are the
// exception, as EKS may not offer their APIs (access entries on a
// CONFIG_MAP cluster, either in an emulator or partition without them):
// with a journal, only those it records are considered, so an apply that
// never touched them leads to no such call. Objects not tagged as ours are
// kept. It returns the items it considered with ActionDelete, ActionKeep
// or ActionAbsent.
func Down(ctx context.Context, d *desired.State, j *Journal, c Clients, o DownOptions) ([]Item, error) {
	r := &runner{c: c, d: d, backoff: o.Backoff}
	cands := slices.DeleteFunc(downCandidates(d, j), func(res resource) bool {
		return len(o.Only) > 0 && !slices.Contains(o.Only, res.group())
	})
	var items []Item
	for i := len(cands) - 1; i >= 0; i-- {
		res := cands[i]
		it := Item{Ref: res.ref(), Group: res.group()}
		if o.DryRun {
			obs, err := res.observe(ctx, r)
			if err != nil {
				return items, err
			}
			switch {
			case !obs.exists:
				it.Action = ActionAbsent
			case obs.ours:
				it.Action = ActionDelete
			default:
				it.Action, it.Reason = ActionKeep, "not created by karpenter-migrate"
			}
		} else {
			removed, err := res.remove(ctx, r)
			if err != nil {
				return items, err
			}
			it.Action = ActionKeep
			if removed {
				it.Action = ActionDelete
			}
		}
		items = append(items, it)
		if o.OnStep != nil {
			o.OnStep(it)
		}
	}
	return items, nil
}

// downCandidates is every object this tool may have created for the
// cluster, in creation order, without duplicates.
func downCandidates(d *desired.State, j *Journal) []resource {
	wide := *d
	if wide.InstanceProfile == "" {
		wide.InstanceProfile = desired.InstanceProfileName(d.Target.Cluster)
	}
	var out []resource
	seen := map[Ref]bool{}
	add := func(rs ...resource) {
		for _, r := range rs {
			k := r.ref()
			k.ARN = ""
			if !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	// The single pre-1.10 policy and the full split set, plus the fifth rule.
	for _, name := range desired.ControllerPolicyNames(d.Target.Cluster) {
		add(&policyRes{name: name, arn: d.PolicyARN(name)})
	}
	w := wide
	w.CreateOIDCProvider = true
	add(slices.DeleteFunc(resources(&w), func(r resource) bool {
		return r.group() == GroupNodeAccess || r.ref().Kind == KindPodIdentity
	})...)
	add(&ruleRes{name: desired.CapacityReservationRuleName(d.Target.Cluster)})
	// Node access and pod identity: what the journal records (a changed
	// authentication mode or identity leaves the other kind there), else
	// what the cluster uses now.
	journalled := func(k Kind) bool {
		return j != nil && slices.ContainsFunc(j.Entries, func(e JournalEntry) bool { return e.Kind == k })
	}
	noJournal := j == nil || len(j.Entries) == 0
	if journalled(KindPodIdentity) || noJournal && d.Identity == desired.IdentityPodIdentity {
		add(&podIdentityRes{cluster: d.Target.Cluster, namespace: d.Namespace, serviceAccount: d.ServiceAccount})
	}
	if journalled(KindAccessEntry) || noJournal && d.NodeAccess == desired.NodeAccessAccessEntry {
		add(&accessEntryRes{cluster: d.Target.Cluster, principal: d.NodeRoleARN})
	}
	if journalled(KindAWSAuth) || noJournal && d.NodeAccess == desired.NodeAccessConfigMap {
		add(&awsAuthRes{entry: awsauth.MapRole{RoleARN: d.NodeRoleARN, Username: "system:node:{{EC2PrivateDNSName}}", Groups: d.AWSAuthGroups}})
	}
	if j != nil {
		for _, e := range j.Entries {
			if res := fromJournal(d, e.Ref); res != nil {
				add(res)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b resource) int { return kindOrder(a.ref().Kind) - kindOrder(b.ref().Kind) })
	return out
}

var kindSequence = []Kind{KindDiscoveryTag, KindNodeRole, KindInstanceProfile, KindOIDCProvider, KindPolicy, KindControllerRole, KindPodIdentity, KindQueue, KindRule, KindAccessEntry, KindAWSAuth}

func kindOrder(k Kind) int { return slices.Index(kindSequence, k) }

// fromJournal rebuilds enough of a journalled object to delete it.
func fromJournal(d *desired.State, ref Ref) resource {
	switch ref.Kind {
	case KindDiscoveryTag:
		return &discoveryTagRes{id: ref.Name, cluster: d.Target.Cluster}
	case KindNodeRole, KindControllerRole:
		return &roleRes{kind: ref.Kind, name: ref.Name, arn: ref.ARN}
	case KindInstanceProfile:
		return &profileRes{name: ref.Name, arn: ref.ARN}
	case KindPolicy:
		return &policyRes{name: ref.Name, arn: ref.ARN}
	case KindOIDCProvider:
		return &oidcRes{url: ref.Name, arn: ref.ARN}
	case KindQueue:
		return &queueRes{name: ref.Name, arn: ref.ARN}
	case KindRule:
		return &ruleRes{name: ref.Name, arn: ref.ARN}
	case KindPodIdentity:
		ns, sa, _ := strings.Cut(ref.Name, "/")
		return &podIdentityRes{cluster: d.Target.Cluster, namespace: ns, serviceAccount: sa}
	case KindAccessEntry:
		return &accessEntryRes{cluster: d.Target.Cluster, principal: ref.Name}
	}
	return nil
}
