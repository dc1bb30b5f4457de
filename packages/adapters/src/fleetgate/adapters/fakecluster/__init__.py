"""The fake cluster: in-memory NodePools, NodeClaims, Nodes and Pods with Karpenter's behaviour."""
