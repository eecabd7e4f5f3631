"""superbiz: a knowledge assistant whose retrieval is governed by code."""
