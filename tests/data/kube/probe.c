/* A pod's whole program for the lab cluster's tests, static (its image holds nothing else):
 *   probe hello          prints "hello from <host name>"
 *   probe serve PORT     answers one TCP connection with "pong from <host name>", then exits
 *   probe call IP PORT   connects (retrying for 60 s), prints what it is told, then exits */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char host[256] = "", buf[512];
    gethostname(host, sizeof host - 1);
    if (argc == 2 && !strcmp(argv[1], "hello")) {
        printf("hello from %s\n", host);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "serve")) {
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1)) return perror("listen"), 1;
        printf("listening on %s\n", argv[2]);
        fflush(stdout);
        int c = accept(s, 0, 0);
        int n = snprintf(buf, sizeof buf, "pong from %s\n", host);
        return write(c, buf, n) == n ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "call")) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
        inet_pton(AF_INET, argv[2], &a.sin_addr);
        for (int i = 0; i < 600; i++) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (!connect(s, (struct sockaddr *)&a, sizeof a)) {
                ssize_t n = read(s, buf, sizeof buf - 1);
                if (n <= 0) return 1;
                buf[n] = 0;
                printf("%s called %s: %s", host, argv[2], buf);
                return 0;
            }
            close(s);
            usleep(100000);
        }
        return fprintf(stderr, "no answer from %s\n", argv[2]), 1;
    }
    return fprintf(stderr, "usage: probe hello | serve PORT | call IP PORT\n"), 2;
}
