package migrations

func init() {
	register(infraStep("06_node_access", "node-access", "let Karpenter nodes join: aws-auth mapRoles entry (backed up first) or EKS access entry"))
}
