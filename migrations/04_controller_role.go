package migrations

func init() {
	register(infraStep("04_controller_role", "controller-role", "create the Karpenter controller IAM role and policies (IRSA or Pod Identity)"))
}
