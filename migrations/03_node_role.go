package migrations

func init() {
	register(infraStep("03_node_role", "node-role", "create the Karpenter node IAM role and instance profile"))
}
