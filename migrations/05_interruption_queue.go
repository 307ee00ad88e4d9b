package migrations

func init() {
	register(infraStep("05_interruption_queue", "interruption-queue", "create the interruption SQS queue and EventBridge rules"))
}
