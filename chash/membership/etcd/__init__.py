"""The etcd store of shared rings: ``EtcdMembership``, ``AsyncEtcdMembership``."""
