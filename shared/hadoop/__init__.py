"""Clients of the Hadoop cluster's REST protocols: WebHDFS and the Oozie Web Services API."""
