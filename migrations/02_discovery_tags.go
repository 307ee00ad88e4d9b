package migrations

func init() {
	register(infraStep("02_discovery_tags", "discovery-tags", "tag the node groups' subnets and security groups karpenter.sh/discovery=<cluster>"))
}
