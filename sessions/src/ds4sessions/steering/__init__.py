"""steering"""
