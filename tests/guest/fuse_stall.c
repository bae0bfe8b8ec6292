/* SPDX-License-Identifier: MIT */
/*
 * A FUSE file system whose server never answers (tests/guest/forged.sh, issue 31): what a
 * container can put at its /dev/shm. Mounted by root with allow_other, so that root's processes
 * are let in and their requests wait for a server that does not read them: any open, readdir,
 * lookup or statfs there waits until the file system goes.
 *
 *   fuse_stall DIR    mount it at DIR, print "mounted", wait for SIGTERM, then detach it and
 *                     exit (closing the device ends whatever still waits)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuse_stall DIR\n");
		return 2;
	}
	int fd = open("/dev/fuse", O_RDWR);
	if (fd < 0) {
		perror("/dev/fuse");
		return 1;
	}
	char opts[128];
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
	if (mount("ta-stall", argv[1], "fuse", MS_NOSUID | MS_NODEV, opts) != 0) {
		perror("mount");
		return 1;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("mounted\n");
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	umount2(argv[1], MNT_DETACH);
	close(fd);
	return 0;
}
