"""The Karpenter gateway: karpenter.sh/v1 NodePools and NodeClaims through kubernetes-asyncio."""
